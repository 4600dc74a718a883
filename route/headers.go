package route

import (
	"bytes"
	"net"
	"strconv"

	"github.com/valyala/fasthttp"
)

// setForwardedFor appends the client's IP to X-Forwarded-For. Every prior
// X-Forwarded-For field, in any case, is folded into one list first (RFC
// 9110 section 5.3), so exactly one field reaches the backend. prior:
// the request may hold one (scanFields).
//
// The rule for a client's word on its origin: X-Forwarded-For is appended
// to, so its last entry is always the peer the proxy saw and the entries
// before it are the client's claims (what uvicorn, with the proxy among
// its forwarded_allow_ips, reads: the last entry not of a trusted proxy).
// Forwarded and X-Real-Ip, which the proxy never sets, are removed in any
// case (cleanRequest): a backend that trusts them would otherwise take
// the client's word for its address. The proxy runs behind L4 balancers,
// which set none of them, so there is nothing to trust them from.
func (p *Proxy) setForwardedFor(ctx *fasthttp.RequestCtx, rc *reqCtx, prior bool) {
	rc.xff = rc.xff[:0]
	h := &ctx.Request.Header
	if prior {
		for _, v := range h.PeekAll(hdrForwardedFor) {
			if len(v) > 0 {
				rc.xff = append(rc.xff, v...)
				rc.xff = append(rc.xff, ", "...)
			}
		}
		h.Del(hdrForwardedFor)
	}
	if cc, ok := ctx.Conn().(*clientConn); ok {
		rc.xff = append(rc.xff, cc.forwardedIP()...)
	} else {
		rc.xff = appendIP(rc.xff, ctx.RemoteIP())
	}
	h.SetBytesV(hdrForwardedFor, rc.xff)
}

// Header names the proxy reads or writes. Both listeners parse header names
// into fasthttp's canonical form (server and HostClient run with name
// normalizing on), so Peek, PeekAll and Del with these names match a field
// whatever case the peer wrote it in: RFC 9110 section 5.1 makes field
// names case-insensitive, and uvicorn, which serves vLLM, writes them in
// lowercase.
const (
	hdrForwardedFor = "X-Forwarded-For"
	hdrRequestID    = "X-Request-Id"
	hdrORCA         = "Endpoint-Load-Metrics"
	hdrORCAFormat   = "Endpoint-Load-Metrics-Format"
	hdrExpect       = "Expect"
	hdrForwarded    = "Forwarded"
	hdrRealIP       = "X-Real-Ip"
)

// maxRequestIDLen bounds a client's X-Request-Id: longer ids are replaced.
const maxRequestIDLen = 128

// clientRequestID returns the client's X-Request-Id when it is usable as
// vLLM's request id: exactly one field of 1 to maxRequestIDLen visible
// ASCII characters. present reports whether the client sent any, so that a
// replaced id can be logged as such. sent: the request may hold one
// (scanFields).
func clientRequestID(h *fasthttp.RequestHeader, sent bool) (id []byte, present bool) {
	if !sent {
		return nil, false
	}
	vs := h.PeekAll(hdrRequestID)
	if len(vs) == 0 {
		return nil, false
	}
	if len(vs) != 1 || !usableRequestID(vs[0]) {
		return nil, true
	}
	return vs[0], true
}

// usableRequestID reports whether one X-Request-Id value is kept as the
// client sent it: 1 to maxRequestIDLen visible ASCII bytes.
func usableRequestID(v []byte) bool {
	if len(v) == 0 || len(v) > maxRequestIDLen {
		return false
	}
	for _, c := range v {
		if c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}

func appendIP(dst []byte, ip net.IP) []byte {
	if ip4 := ip.To4(); ip4 != nil {
		for i, b := range ip4 {
			if i > 0 {
				dst = append(dst, '.')
			}
			dst = strconv.AppendUint(dst, uint64(b), 10)
		}
		return dst
	}
	return append(dst, ip.String()...)
}

const hexDigits = "0123456789abcdef"

// appendRequestID appends a 16-hex-digit request id derived from r.
func appendRequestID(dst []byte, r uint64) []byte {
	for i := 15; i >= 0; i-- {
		dst = append(dst, hexDigits[(r>>(uint(i)*4))&0xf])
	}
	return dst
}

// appendUpstreamID appends the X-Request-Id the backend gets for a request
// whose client chose its own id: that id, '-', and 16 hex digits of seq,
// a number no other request of this proxy carries (Proxy.upSeq).
//
// vLLM makes X-Request-Id its engine's request id and, before its PR
// #27987 (November 2025), keys each request's state by it. Two requests in
// flight with one id, whichever clients sent them, then collide: the
// second is refused ("Request id ... already running", vllm#10583), the
// abort of the first (its client went away) can abort the second
// (vllm#23697), and duplicate ids have crashed the V1 engine
// (vllm#15041). A client choosing the id would let it reach another
// client's request on the pod. Forwarded as is, then, a client's id is
// unsafe; suffixed, ids from two requests never compare equal: a suffixed
// id ends in '-' and 16 hex digits (then -r<n> on a retry), so two are
// equal only when their clients' ids and their numbers are, and a
// generated id (16 hex digits alone, or with -r<n>) has no '-' where a
// suffixed one does. vLLM's logs still carry the client's id, as the
// suffixed id's prefix; the client gets its own id back, unsuffixed.
func appendUpstreamID(dst, id []byte, seq uint64) []byte {
	dst = append(dst, id...)
	dst = append(dst, '-')
	return appendRequestID(dst, seq)
}

// Request header fields the proxy refuses, in its messages to the client.
const (
	msgFramingBoth     = "request has both Content-Length and Transfer-Encoding"
	msgFramingNotChunk = "request Transfer-Encoding is not chunked"
	msgNameSpace       = "request header name contains a space"
)

// msgConnOptions refuses a request whose Connection fields list more than
// maxConnectionOptions options.
var msgConnOptions = "request Connection header lists more than " + strconv.Itoa(maxConnectionOptions) + " options"

// maxConnectionOptions bounds the options a message's Connection fields
// list, all fields together (RFC 9110 section 7.6.1 sets no bound). Each
// option names a field stripHop deletes with a pass over every field of
// the message, so the cost of stripping is options times fields: a
// 64 KiB request listing 16,000 options beside 8,000 fields cost about
// half a second of CPU (quadratic), where one request costs tens of
// microseconds. Clients send one or two ("keep-alive", "Upgrade,
// HTTP2-Settings"); a request with more is refused (Handle), so stripping
// costs at most this many passes.
const maxConnectionOptions = 16

// tooManyConnectionOptions reports whether h's Connection fields, as
// parsed (repeated fields and folded lines included), list more than
// maxConnectionOptions options. It reads them without deleting anything.
func tooManyConnectionOptions[H hopHeader](h H) bool {
	n := 0
	for _, v := range h.PeekAll("Connection") {
		for len(v) > 0 {
			i := bytes.IndexByte(v, ',')
			if i < 0 {
				i = len(v)
			}
			if len(bytes.Trim(v[:i], " \t")) > 0 {
				if n++; n > maxConnectionOptions {
					return true
				}
			}
			if i == len(v) {
				break
			}
			v = v[i+1:]
		}
	}
	return false
}

var (
	strContentLength = []byte("Content-Length")
	strChunked       = []byte("chunked")
)

// scanFields reads raw request headers once: why they are refused, or ""
// (see below), and which of the fields the proxy strips or rewrites
// (fieldSet) they hold, so that the handler deletes and looks up only
// those.
//
// The body's length in doubt (RFC 9112 section 6.3): both Content-Length
// and Transfer-Encoding, or a Transfer-Encoding other than chunked.
// fasthttp reads an "identity" body as empty, so its bytes would be parsed
// as the connection's next request (fasthttp itself refuses any other
// coding, lists and repeated fields).
//
// A field name with a space inside, which is no token (RFC 9110 section
// 5.1): fasthttp accepts it (it refuses every other non-token byte) and
// would forward it as written, for the backend to refuse in its own words
// or read its own way.
//
// The set is never smaller than what fasthttp parsed: names are compared
// without regard to case, and a request whose parsed header may hold
// fields its raw block does not show (no raw block, as for a request built
// by code; or a chunked body, whose trailer fields fasthttp keeps) gets
// every field (allFields), so that it is cleaned the slow way.
func scanFields(raw []byte) (msg string, present fieldSet) {
	if len(raw) == 0 {
		return "", allFields
	}
	var cl, te bool
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		if i := bytes.IndexByte(line, ':'); i > 0 {
			k := line[:i]
			if bytes.IndexByte(k, ' ') >= 0 {
				return msgNameSpace, 0
			}
			f := fieldOf(k)
			present |= f
			switch {
			case f == fTransferEncoding:
				te = true
				if !bytes.EqualFold(bytes.Trim(line[i+1:], " \t\r"), strChunked) {
					return msgFramingNotChunk, 0
				}
			case f == 0 && bytes.EqualFold(k, strContentLength):
				cl = true
			}
		}
	}
	if cl && te {
		return msgFramingBoth, 0
	}
	if te {
		present = allFields // trailers may follow the chunked body
	}
	return "", present
}

func bytesHasPrefix(b []byte, prefix string) bool {
	return len(b) >= len(prefix) && string(b[:len(prefix)]) == prefix
}

// fieldSet is a set of the header fields the proxy strips or rewrites:
// bit i stands for fieldNames[i].
type fieldSet uint16

// The fields of fieldNames, as bits of a fieldSet.
const (
	fConnection fieldSet = 1 << iota
	fKeepAlive
	fProxyConnection
	fProxyAuthenticate
	fProxyAuthorization
	fTe
	fTrailer
	fTransferEncoding
	fUpgrade
	fForwardedFor
	fRequestID
	fORCA
	fORCAFormat
	fExpect
	fForwarded
	fRealIP

	numFields = iota
	// hopFields are the hop-by-hop headers a proxy must not forward
	// (RFC 9110 section 7.6.1). Upgrade is among them: the proxy never
	// opens a tunnel, so a backend must answer a request normally.
	hopFields = fConnection | fKeepAlive | fProxyConnection | fProxyAuthenticate |
		fProxyAuthorization | fTe | fTrailer | fTransferEncoding | fUpgrade
	allFields fieldSet = 1<<numFields - 1
)

// fieldNames are the names of a fieldSet's bits, in fasthttp's canonical
// form; Del and PeekAll match them in any case (see hdrRequestID).
var fieldNames = [numFields]string{
	"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
	hdrForwardedFor, hdrRequestID, hdrORCA, hdrORCAFormat, hdrExpect,
	hdrForwarded, hdrRealIP,
}

// fieldOf returns the bit of the field named name, in any case, or 0.
func fieldOf(name []byte) fieldSet {
	for i := range fieldNames {
		if asciiEqualFold(name, fieldNames[i]) {
			return 1 << i
		}
	}
	return 0
}

// responseFields returns the fields of fieldNames h holds, read in one pass
// over its fields (names as fasthttp parsed them), and whether a field
// name holds a space. Such a name is no token (RFC 9110 section 5.1), so
// the answer is malformed: fasthttp's parser lets it through (it refuses
// every other non-token byte, and trims spaces before the colon), but
// Go's net/http client and h11 (httpx, the OpenAI Python SDK) refuse the
// whole response, and nginx answers 502 "upstream sent invalid header".
// The proxy answers 502 as well rather than pass it to its clients.
func responseFields(h *fasthttp.ResponseHeader) (present fieldSet, spaceInName bool) {
	for k := range h.All() {
		present |= fieldOf(k)
		if bytes.IndexByte(k, ' ') >= 0 {
			spaceInName = true
		}
	}
	return present, spaceInName
}

// hopHeader is what stripHop needs of a header: *fasthttp.RequestHeader
// and *fasthttp.ResponseHeader both have it.
type hopHeader interface {
	PeekAll(key string) [][]byte
	Del(key string)
	DelBytes(key []byte)
	ResetConnectionClose()
}

// stripHop removes the hop-by-hop headers, including those named by any
// of its Connection fields, from an outgoing request (&req.Header) or from
// a response going back to the client (&resp.Header). present is what a
// scan found h to hold (scanFields, responseFields; allFields when not
// known): only those are looked for, instead of nine deletions, each a
// pass over the fields, on every request and response.
func stripHop[H hopHeader](h H, present fieldSet) {
	if present&fConnection != 0 {
		for _, c := range h.PeekAll("Connection") {
			forEachToken(c, func(name []byte) { h.DelBytes(name) })
		}
	}
	for i := range fieldNames {
		if present&hopFields&(1<<i) != 0 {
			h.Del(fieldNames[i])
		}
	}
	h.ResetConnectionClose()
}

// forEachToken calls f with each comma-separated, trimmed token of v.
func forEachToken(v []byte, f func([]byte)) {
	for len(v) > 0 {
		i := 0
		for i < len(v) && v[i] != ',' {
			i++
		}
		tok := v[:i]
		for len(tok) > 0 && (tok[0] == ' ' || tok[0] == '\t') {
			tok = tok[1:]
		}
		for len(tok) > 0 && (tok[len(tok)-1] == ' ' || tok[len(tok)-1] == '\t') {
			tok = tok[:len(tok)-1]
		}
		if len(tok) > 0 {
			f(tok)
		}
		if i == len(v) {
			break
		}
		v = v[i+1:]
	}
}
