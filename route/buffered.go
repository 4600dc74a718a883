package route

import "github.com/valyala/fasthttp"

// maxBufferedBody is the largest upstream answer that is read whole before
// the client's response is written, as nginx's proxy buffering does: a
// non-streaming answer (not text/event-stream) with a Content-Length. The
// upstream transport reads it into the upstream Response with its head
// (upstreamTransport) and gives the connection back to its pool before the
// client's write; forwardBuffered copies it to the client's response. It
// saves the streaming machinery (a pooled bodyStream, a body reader, a
// client write deadline per chunk). Larger answers, answers without a
// length and SSE streams go through bodyStream, which hands each chunk on
// as it arrives.
const maxBufferedBody = 16 << 10

// bufferable reports whether an upstream answer with head h is read whole
// (see maxBufferedBody).
func bufferable(h *fasthttp.ResponseHeader) bool {
	size := h.ContentLength()
	return !isSSE(h) && size >= 0 && size <= maxBufferedBody
}

// isSSE reports whether an upstream answer with head h is a Server-Sent
// Events stream.
func isSSE(h *fasthttp.ResponseHeader) bool {
	return bytesHasPrefix(h.ContentType(), "text/event-stream")
}
