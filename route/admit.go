package route

import (
	"bytes"

	"github.com/valyala/fasthttp"
)

// admit decides, before any backend is picked, whether a parsed request is
// one the proxy forwards. It returns 0 to forward, or the status and fixed
// message to answer with. A refused request never reaches a breaker: its
// fault is the client's, not a backend's.
//
//   - The protocol must be HTTP/1.1 or HTTP/1.0, else 505: anything else
//     would be forwarded in a request line the backend may read otherwise.
//   - An HTTP/1.1 request must carry a Host field (RFC 9112 section 3.2),
//     else 400. HTTP/1.0 needs none: the backend gets its own Host anyway.
//   - The target must be origin-form ("/path"), "*" for OPTIONS, or
//     absolute-form with scheme http or https and no userinfo, else 400:
//     userinfo would become an Authorization header upstream, and any other
//     scheme names a protocol the proxy does not speak.
//   - No trailer fields, received or announced, else 400: the body goes
//     upstream with a Content-Length, and fasthttp would merge the
//     trailers into the header section (RFC 9110 section 6.5.1 forbids
//     it), where they pass for fields a gateway in front never checked.
//     OpenAI clients send none.
func admit(h *fasthttp.RequestHeader) (status int, msg string) {
	switch proto := h.Protocol(); {
	case string(proto) == "HTTP/1.1":
		if len(h.Host()) == 0 {
			return fasthttp.StatusBadRequest, "HTTP/1.1 request without a Host header"
		}
	case string(proto) == "HTTP/1.0":
	default:
		return fasthttp.StatusHTTPVersionNotSupported, messageFor(fasthttp.StatusHTTPVersionNotSupported)
	}
	if !validTarget(h.RequestURI(), h.IsOptions()) {
		return fasthttp.StatusBadRequest, "request target must be a path, or an http(s) URL without userinfo"
	}
	if len(h.PeekTrailerKeys()) > 0 {
		return fasthttp.StatusBadRequest, "request trailer fields are not supported"
	}
	return 0, ""
}

// validTarget reports whether a raw request target is one the proxy
// forwards (see admit).
func validTarget(t []byte, options bool) bool {
	switch {
	case len(t) == 0:
		return false
	case t[0] == '/':
		return true
	case len(t) == 1 && t[0] == '*':
		return options
	}
	scheme, rest, ok := bytes.Cut(t, []byte("://"))
	if !ok || !(asciiEqualFold(scheme, "http") || asciiEqualFold(scheme, "https")) {
		return false
	}
	authority := rest
	if i := bytes.IndexAny(rest, "/?#"); i >= 0 {
		authority = rest[:i]
	}
	return bytes.IndexByte(authority, '@') < 0
}

// asciiEqualFold reports whether b and s are the same ASCII text, case
// aside (s holds letters, digits and '-' only).
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		if b[i]|0x20 != s[i]|0x20 {
			return false
		}
	}
	return true
}
