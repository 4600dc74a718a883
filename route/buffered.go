package route

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/valyala/fasthttp"
)

// maxBufferedBody is the largest upstream answer that is read whole before
// the client's response is written, as nginx's proxy buffering does: a
// non-streaming answer (not text/event-stream) with a Content-Length. It
// costs one copy, and saves the streaming machinery (a pooled bodyStream,
// fasthttp's stream reader, a client write deadline per chunk) and returns
// the upstream connection to its pool before the client's write. Larger
// answers, answers without a length and SSE streams go through bodyStream,
// which hands each chunk on as it arrives.
const maxBufferedBody = 16 << 10

var bufferedBodyPool = sync.Pool{New: func() any { return new([maxBufferedBody]byte) }}

// errBodyTooLong: the upstream sent more bytes than its Content-Length.
var errBodyTooLong = errors.New("upstream body longer than its Content-Length")

// bufferable reports whether an upstream answer of this length and type is
// read whole (see maxBufferedBody).
func bufferable(size int, sse bool) bool {
	return !sse && size >= 0 && size <= maxBufferedBody
}

// readBuffered reads exactly size bytes of body from up (each read bounded
// by the upstream connection's idle deadline) into dst's body.
func readBuffered(up io.Reader, size int, dst *fasthttp.Response) error {
	buf := bufferedBodyPool.Get().(*[maxBufferedBody]byte)
	defer bufferedBodyPool.Put(buf)
	if n, err := io.ReadFull(up, buf[:size]); err != nil {
		return fmt.Errorf("upstream body: %d of %d bytes: %w", n, size, err)
	}
	// The stream ends at Content-Length: this read only confirms it, so
	// that the connection goes back to the pool.
	if n, _ := up.Read(buf[:1]); n > 0 {
		return errBodyTooLong
	}
	dst.SetBody(buf[:size])
	return nil
}
