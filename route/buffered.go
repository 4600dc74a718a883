package route

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

// bufferable reports whether an upstream answer of this length and type is
// read whole (see maxBufferedBody).
func bufferable(size int, sse bool) bool {
	return !sse && size >= 0 && size <= maxBufferedBody
}
