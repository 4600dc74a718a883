package route

import (
	"bytes"
	"net"
	"strconv"

	"github.com/valyala/fasthttp"
)

// setForwardedFor appends the client's IP to X-Forwarded-For.
func (p *Proxy) setForwardedFor(ctx *fasthttp.RequestCtx, rc *reqCtx) {
	ip := ctx.RemoteIP()
	rc.xff = rc.xff[:0]
	if prior := ctx.Request.Header.Peek("X-Forwarded-For"); len(prior) > 0 {
		rc.xff = append(rc.xff, prior...)
		rc.xff = append(rc.xff, ", "...)
	}
	rc.xff = appendIP(rc.xff, ip)
	ctx.Request.Header.SetBytesV("X-Forwarded-For", rc.xff)
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

// ambiguousFraming reports whether raw request headers carry both
// Content-Length and Transfer-Encoding.
var (
	strContentLength    = []byte("Content-Length")
	strTransferEncoding = []byte("Transfer-Encoding")
)

func ambiguousFraming(raw []byte) bool {
	var cl, te bool
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		if i := bytes.IndexByte(line, ':'); i > 0 {
			switch k := line[:i]; {
			case bytes.EqualFold(k, strContentLength):
				cl = true
			case bytes.EqualFold(k, strTransferEncoding):
				te = true
			}
		}
	}
	return cl && te
}

func bytesHasPrefix(b []byte, prefix string) bool {
	return len(b) >= len(prefix) && string(b[:len(prefix)]) == prefix
}

// hopHeaders are the hop-by-hop headers a proxy must not forward
// (RFC 9110 section 7.6.1), in fasthttp's canonical form.
var hopHeaders = []string{
	"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// stripHopRequest removes hop-by-hop headers from an outgoing request,
// including those named by its Connection header.
func stripHopRequest(h *fasthttp.RequestHeader) {
	if c := h.Peek("Connection"); len(c) > 0 {
		forEachToken(c, func(name []byte) { h.DelBytes(name) })
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
	h.ResetConnectionClose()
}

// stripHopResponse removes hop-by-hop headers from a response going back to
// the client.
func stripHopResponse(h *fasthttp.ResponseHeader) {
	if c := h.Peek("Connection"); len(c) > 0 {
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
