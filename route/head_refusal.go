package route

import (
	"math"

	"github.com/valyala/fasthttp"
)

// headVerdict is what the proxy decides about a request from its head
// alone (judgeHead): forward it (status 0), or answer status with msg.
type headVerdict struct {
	status int
	msg    string
	allow  string // the Allow field of a 405
	// close: the request's framing or protocol cannot be trusted, so the
	// connection ends after the answer (closeAfterRefusal).
	close bool
	// fields is what scanFields found in the head (for cleanRequest);
	// query the target's query (for allowList.forwardDecided). Both only
	// when the request is forwarded.
	fields fieldSet
	query  []byte
}

// judgeHead decides from h alone whether the proxy forwards the request,
// in this order: CONNECT is refused 405; then admit's rules (400 or 505,
// closing the connection); with bodyRule, no body on GET, HEAD or TRACE
// (carriesBody; 400, closing); then scanFields' framing and field-name
// rules and the Connection options bound (400, closing); then
// route.allow_paths (allow, 404 or 405). It leaves in rc.path the
// normalized path it decided on (allowList.judge). It reads no body: the
// server calls it before reading one (Proxy.headReceived), and Handle
// again on the whole request, with the same verdict. bodyRule is false
// only where the body is chunked and unread: whether its chunks hold a
// byte is not in the head (headReceived).
func judgeHead(h *fasthttp.RequestHeader, allow *allowList, rc *reqCtx, bodyRule bool) headVerdict {
	if h.IsConnect() {
		// A model server is no tunnel endpoint: never forward CONNECT.
		return headVerdict{status: fasthttp.StatusMethodNotAllowed, msg: "CONNECT is not supported"}
	}
	if status, msg := admit(h); status != 0 {
		return headVerdict{status: status, msg: msg, close: true}
	}
	if bodyRule && carriesBody(h) && bodiless(h) {
		return headVerdict{status: fasthttp.StatusBadRequest, msg: msgBodyNotAllowed, close: true}
	}
	msg, fields := scanFields(h.RawHeaders())
	if msg == "" && fields&fConnection != 0 && tooManyConnectionOptions(h) {
		msg = msgConnOptions // stripping them would cost a pass each
	}
	if msg != "" {
		// Content-Length and Transfer-Encoding together, or a coding
		// other than chunked, are the shapes of request smuggling (RFC
		// 9112 section 6.3), and a field name with a space is no HTTP:
		// refuse, and close the connection since its framing cannot be
		// trusted. Connection fields listing more than
		// maxConnectionOptions options are refused alike: stripping
		// each would cost a pass over the fields.
		return headVerdict{status: fasthttp.StatusBadRequest, msg: msg, close: true}
	}
	query, status, allowed := allow.judge(h.Method(), h.RequestURI(), rc)
	switch status {
	case 0:
		return headVerdict{fields: fields, query: query}
	case fasthttp.StatusMethodNotAllowed:
		// Never sent to a pod: operator endpoints (/metrics, /sleep,
		// /v1/load_lora_adapter, ...) are not the clients' to call.
		return headVerdict{status: status, msg: "method not allowed for this path by route.allow_paths", allow: allowed}
	}
	return headVerdict{status: status, msg: "path not allowed by route.allow_paths"}
}

// refuse answers a request refused by judgeHead, and counts it under
// backend "none".
func (p *Proxy) refuse(ctx *fasthttp.RequestCtx, v headVerdict) {
	writeError(ctx, v.status, v.msg)
	if v.allow != "" {
		ctx.Response.Header.Set("Allow", v.allow)
	}
	if v.close {
		closeAfterRefusal(ctx)
	}
	p.metrics.requests(nil, v.status)
}

// bodiless reports whether h's method is one that must carry no body:
// GET, HEAD or TRACE (carriesBody).
func bodiless(h *fasthttp.RequestHeader) bool {
	return h.IsGet() || h.IsHead() || h.IsTrace()
}

// headReceived is the server's HeaderReceived hook: it refuses a request
// on its head, before fasthttp reads its body. Without it a request the
// proxy refuses (a path route.allow_paths does not allow, a body on GET)
// cost as much reading as one it forwards, up to server.max_body_bytes at
// whatever pace the client sent it within server.read_timeout, and its
// refusal waited for the last byte.
//
// A request without a body is left to Handle (nothing to save). For one
// with a body that judgeHead refuses, the body limit of that request is
// lowered to refusedBodyLimit, so fasthttp stops before reading it and
// hands ErrBodyTooLarge to handleParseError, which answers with the
// refusal (refusedOnHead) and closes the connection, the body unread: a
// lingering close then discards at most lingerMaxBytes of it, over at
// most lingerTime. A one-byte body is read, and refused by Handle.
//
// A chunked body is given the Content-Length chunkedUnread instead (the
// head is otherwise unchanged): fasthttp refuses a declared length before
// reading anything and keeps the head, where the chunk reader would read
// the first chunk's size line and forget the head on its error. It is
// judged without the rule on bodies (its chunks may all be empty, which
// makes no body), so a chunked GET the rest of its head allows is read as
// before, and Handle applies the rule.
//
// With Expect: 100-continue fasthttp still sends its 100 Continue before
// the body limit is checked; the client then gets the refusal at once.
func (p *Proxy) headReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	if !carriesBody(h) {
		return fasthttp.RequestConfig{}
	}
	chunked := h.ContentLength() < 0
	rc := p.rcPool.Get().(*reqCtx)
	v := judgeHead(h, p.snap.Load().set.allow, rc, !chunked)
	p.rcPool.Put(rc)
	if v.status == 0 {
		return fasthttp.RequestConfig{}
	}
	if chunked {
		h.SetContentLength(chunkedUnread)
	}
	return fasthttp.RequestConfig{MaxRequestBodySize: refusedBodyLimit}
}

const (
	// refusedBodyLimit is the body limit headReceived gives a request it
	// refuses: the smallest fasthttp takes (0 means its default).
	refusedBodyLimit = 1
	// chunkedUnread is the Content-Length headReceived gives a refused
	// chunked request, which refusedOnHead recognizes: the largest body
	// limit newServer gives fasthttp, so a client declaring it is
	// refused unread anyway (a GET then gets 413, not the 400 of a body
	// on GET).
	chunkedUnread = math.MaxInt32
)

// refusedOnHead reports how to answer a request whose body fasthttp did
// not read because it was over its limit (ErrBodyTooLarge): with the
// refusal judgeHead gives its head, when it refuses it (headReceived
// lowered the limit; or the path was refused anyway and the body was over
// server.max_body_bytes too), else status 0 (a 413). fasthttp keeps the
// head when it refused a declared length, and resets it when a chunk
// went over (Content-Length 0 then): only a head with a length is judged,
// and one with chunkedUnread as headReceived judged it.
func (p *Proxy) refusedOnHead(ctx *fasthttp.RequestCtx) headVerdict {
	h := &ctx.Request.Header
	n := h.ContentLength()
	if n <= 0 {
		return headVerdict{}
	}
	rc := p.rcPool.Get().(*reqCtx)
	v := judgeHead(h, p.snap.Load().set.allow, rc, n != chunkedUnread)
	p.rcPool.Put(rc)
	return v
}
