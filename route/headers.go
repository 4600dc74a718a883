package route

import (
	"bytes"
	"net"
	"strconv"

	"github.com/valyala/fasthttp"
)

// setForwardedFor appends the client's IP to X-Forwarded-For. Every prior
// X-Forwarded-For field, in any case, is folded into one list first (RFC
// 9110 section 5.3), so exactly one field reaches the backend.
func (p *Proxy) setForwardedFor(ctx *fasthttp.RequestCtx, rc *reqCtx) {
	ip := ctx.RemoteIP()
	rc.xff = rc.xff[:0]
	h := &ctx.Request.Header
	for _, prior := range h.PeekAll(hdrForwardedFor) {
		if len(prior) > 0 {
			rc.xff = append(rc.xff, prior...)
			rc.xff = append(rc.xff, ", "...)
		}
	}
	rc.xff = appendIP(rc.xff, ip)
	h.Del(hdrForwardedFor)
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
)

// maxRequestIDLen bounds a client's X-Request-Id: longer ids are replaced.
const maxRequestIDLen = 128

// clientRequestID returns the client's X-Request-Id when it is usable as
// vLLM's request id: exactly one field of 1 to maxRequestIDLen visible
// ASCII characters. present reports whether the client sent any, so that a
// replaced id can be logged as such.
func clientRequestID(h *fasthttp.RequestHeader) (id []byte, present bool) {
	vs := h.PeekAll(hdrRequestID)
	if len(vs) == 0 {
		return nil, false
	}
	if len(vs) != 1 || len(vs[0]) == 0 || len(vs[0]) > maxRequestIDLen {
		return nil, true
	}
	for _, c := range vs[0] {
		if c < 0x21 || c > 0x7e {
			return nil, true
		}
	}
	return vs[0], true
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

// Request header fields the proxy refuses, in its messages to the client.
const (
	msgFramingBoth     = "request has both Content-Length and Transfer-Encoding"
	msgFramingNotChunk = "request Transfer-Encoding is not chunked"
	msgNameSpace       = "request header name contains a space"
)

var (
	strContentLength    = []byte("Content-Length")
	strTransferEncoding = []byte("Transfer-Encoding")
	strChunked          = []byte("chunked")
)

// badFields returns why raw request headers are refused, or "".
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
func badFields(raw []byte) string {
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
				return msgNameSpace
			}
			switch {
			case bytes.EqualFold(k, strContentLength):
				cl = true
			case bytes.EqualFold(k, strTransferEncoding):
				te = true
				if !bytes.EqualFold(bytes.Trim(line[i+1:], " \t\r"), strChunked) {
					return msgFramingNotChunk
				}
			}
		}
	}
	if cl && te {
		return msgFramingBoth
	}
	return ""
}

func bytesHasPrefix(b []byte, prefix string) bool {
	return len(b) >= len(prefix) && string(b[:len(prefix)]) == prefix
}

// hopHeaders are the hop-by-hop headers a proxy must not forward
// (RFC 9110 section 7.6.1), in fasthttp's canonical form; Del matches them
// in any case (see hdrRequestID). Upgrade is among them: the proxy never
// opens a tunnel, so a backend must answer a request normally.
var hopHeaders = []string{
	"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// hopHeader is what stripHop needs of a header: *fasthttp.RequestHeader
// and *fasthttp.ResponseHeader both have it.
type hopHeader interface {
	PeekAll(key string) [][]byte
	Del(key string)
	DelBytes(key []byte)
	ResetConnectionClose()
}

// stripHop removes hop-by-hop headers, including those named by any of its
// Connection fields, from an outgoing request (&req.Header) or from a
// response going back to the client (&resp.Header).
func stripHop[H hopHeader](h H) {
	for _, c := range h.PeekAll("Connection") {
		forEachToken(c, func(name []byte) { h.DelBytes(name) })
	}
	for _, k := range hopHeaders {
		h.Del(k)
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
