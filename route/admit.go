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
//
// The rule on bodies (no body on GET, HEAD or TRACE: carriesBody) is
// judgeHead's, since a chunked body's emptiness is not in the head.
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

// msgBodyNotAllowed refuses a GET, HEAD or TRACE request with a body.
const msgBodyNotAllowed = "GET, HEAD and TRACE requests must not carry a body"

// carriesBody reports whether a request read whole carries a body: a
// Content-Length above 0 (fasthttp read that many bytes), or chunks that
// held bytes (a chunked body with none reads as Content-Length 0, and is
// forwarded as no body).
//
// On GET, HEAD and TRACE such a body is refused (judgeHead). RFC 9110 gives
// it no meaning (sections 9.3.1, 9.3.2; a TRACE client "MUST NOT send
// content") and warns that some implementations reject it for its
// potential as a request smuggling attack: a server that ignores
// Content-Length on GET (the CL.0 class) reads the body as the next
// request on the connection. Forwarded on the proxy's pooled connection,
// that request would be one route.allow_paths never judged (a pod's
// /sleep or /v1/load_lora_adapter), and its answer another client's.
// vLLM's GET routes (/v1/models, /health, /version) read no body, so
// nothing a client needs is lost; nginx forwards such bodies, as
// fasthttp's client would.
func carriesBody(h *fasthttp.RequestHeader) bool {
	return h.ContentLength() > 0 || h.ContentLength() == -1
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
