package route

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"

	"github.com/valyala/fasthttp"
)

// upstreamBody is a streamed upstream response body (upstreamTransport):
// it decodes the body's framing itself (a Content-Length, chunked
// transfer coding, or until the backend closes) straight off the pooled
// connection. It owns the connection until closed. Used by one goroutine
// at a time: the proxy reads a body and closes it on the same goroutine
// (bodyStream, the hijack pump), or closes one no goroutine reads
// (Shutdown cutting streams whose pump had not started).
//
// It holds a buffer only while it reads: the buffer comes from bodyBufs
// when a read finds bytes on the socket, and goes back when a read finds
// none and waits (deadlineConn.readLent), or before a read straight into
// the caller's buffer. An idle stream between two chunks therefore holds
// no buffer at all, only this value, and a busy one keeps its buffer from
// one read to the next. Chunk data larger than what is buffered is read straight
// into the caller's buffer, as bufio does, so a large body is not copied
// through it.
//
// It is strict, because what a backend writes after a body becomes the
// next exchange's answer if the connection is reused: a chunk size line
// that is not hex digits (with optional whitespace and chunk extensions)
// ended by CRLF, a size that overflows, chunk data not followed by CRLF,
// a line longer than the buffer, or a trailer field that is not
// "name: value" fail the body (an upstream failure mid-body); the
// connection of a failed body, of one with trailer fields (never
// forwarded), of one followed by bytes already read, or of one read to
// the close is closed, never reused. Bytes arriving after a body ended
// cleanly are guardedConn's to find before a reuse.
type upstreamBody[C connHandle] struct {
	pool *bodyPool[C]
	hc   *fasthttp.HostClient
	cc   C
	conn net.Conn      // the connection, read for data past the buffer
	dc   *deadlineConn // the same connection, for reads into a lent buffer; nil if it is not one

	buf       *[]byte // from bodyBufs, while bytes wait in buf[r:w]; else nil
	r, w      int
	state     bodyState
	left      int64 // bytes left in the body (bodyLength) or the chunk (bodyChunkData)
	trailer   int   // trailer bytes read so far
	err       error // the body's end: io.EOF, or why it failed
	closeConn bool  // the connection must not be reused
	closed    bool
}

// bodyState is where an upstreamBody is in its framing.
type bodyState uint8

const (
	bodyLength    bodyState = iota // data, left bytes to the end of the body
	bodyToClose                    // data until the backend closes
	bodyChunkSize                  // a chunk size line is next
	bodyChunkData                  // data, left bytes to the end of the chunk
	bodyChunkEnd                   // the CRLF after a chunk's data is next
	bodyTrailers                   // trailer fields or the final CRLF are next
	bodyDone                       // the body ended
)

// bodyBufSize is an upstreamBody's buffer: as large as the connection's
// read buffer (upstreamReadBuffer), so what that buffered past the head
// fits, and the longest chunk size line or trailer field accepted.
const bodyBufSize = upstreamReadBuffer

// maxTrailerBytes bounds a chunked body's trailer section.
const maxTrailerBytes = bodyBufSize

var (
	// bodyBufs are upstreamBody buffers.
	bodyBufs = sync.Pool{New: func() any { b := make([]byte, bodyBufSize); return &b }}
	// bodyBufsHeld counts the body buffers taken and not yet returned.
	bodyBufsHeld atomic.Int64
)

// takeBodyBuf takes a buffer from bodyBufs, counted in bodyBufsHeld.
func takeBodyBuf() *[]byte {
	bodyBufsHeld.Add(1)
	return bodyBufs.Get().(*[]byte)
}

// giveBodyBuf returns a buffer takeBodyBuf gave.
func giveBodyBuf(b *[]byte) {
	bodyBufsHeld.Add(-1)
	bodyBufs.Put(b)
}

// The ways a body's framing can be broken.
var (
	errChunkSize     = errors.New("upstream body: malformed chunk size line")
	errChunkOverflow = errors.New("upstream body: chunk size overflows")
	errChunkEnd      = errors.New("upstream body: chunk data not followed by CRLF")
	errBareLF        = errors.New("upstream body: chunk size line or trailer field not ended by CRLF")
	errBodyLine      = errors.New("upstream body: chunk size line or trailer field longer than the read buffer")
	errTrailer       = errors.New("upstream body: malformed trailer field")
	errTrailerSize   = errors.New("upstream body: trailer section too large")
)

// maxChunkSize is the largest chunk size accepted (2^62 - 1 bytes).
const maxChunkSize = 1<<62 - 1

// start makes b the body of a response whose head was just read with br:
// size is its framing as fasthttp reads it (a length, -1 chunked, -2 until
// the close), and what br buffered past the head is taken over.
func (b *upstreamBody[C]) start(size int, br *bufio.Reader) {
	switch {
	case size >= 0:
		b.state, b.left = bodyLength, int64(size)
		if size == 0 {
			b.state, b.err = bodyDone, io.EOF
		}
	case size == -1:
		b.state = bodyChunkSize
	default:
		b.state, b.closeConn = bodyToClose, true
	}
	if n := br.Buffered(); n > 0 {
		p, _ := br.Peek(n)
		b.buf = takeBodyBuf()
		if n > len(*b.buf) { // a reader larger than upstreamReadBuffer
			*b.buf = make([]byte, n)
		}
		b.w = copy(*b.buf, p)
		if b.state == bodyDone {
			b.closeConn = true
		}
	}
}

// Read reads the body's data. A zero-length Read waits, holding no
// buffer, until the next chunk's size line has arrived (or the last
// chunk: io.EOF, or a failure); where data is due (inside a chunk, or a
// body without chunks) it returns at once, and the next Read waits with
// the caller's buffer. A Read with room returns at least one byte (a
// failure that came with bytes is returned by the next Read), or the
// body's end (io.EOF, with the last bytes of a Content-Length body) or
// failure; both stay for every later Read.
func (b *upstreamBody[C]) Read(p []byte) (int, error) {
	if b.closed {
		return 0, io.ErrClosedPipe
	}
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.read(p)
	if err != nil {
		b.err = err
		if err != io.EOF {
			b.closeConn = true
		}
	}
	return n, err
}

func (b *upstreamBody[C]) read(p []byte) (int, error) {
	if err := b.frame(true); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if b.state == bodyLength || b.state == bodyChunkData {
		if int64(len(p)) > b.left {
			p = p[:b.left]
		}
	}
	var n int
	var err error
	if b.r < b.w {
		n = copy(p, (*b.buf)[b.r:b.w])
		b.r += n
	} else {
		b.drop() // this read waits with the caller's buffer
		for i := 0; n == 0 && err == nil; i++ {
			if i == maxEmptyReads {
				return 0, io.ErrNoProgress
			}
			n, err = b.conn.Read(p)
		}
	}
	switch b.state {
	case bodyToClose:
		if err == io.EOF {
			b.state = bodyDone
			return n, io.EOF
		}
	case bodyLength:
		b.left -= int64(n)
		if b.left == 0 {
			b.state = bodyDone
			return n, b.ended()
		}
	default:
		b.left -= int64(n)
		if b.left == 0 {
			b.state = bodyChunkEnd
		}
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		if n > 0 {
			// The bytes first; the failure on the next Read.
			b.err, b.closeConn = err, true
			return n, nil
		}
		return 0, err
	}
	// The chunk's CRLF, when already read, is taken now, so that the
	// buffer can go back before the wait for the next chunk. The end of
	// the body is reported by the next Read, as fasthttp's reader did: a
	// client that fails to take these bytes was not given the whole body.
	if b.state == bodyChunkEnd {
		if ok, _ := b.has(2, false); ok {
			if err := b.frameEnd(); err != nil {
				b.err, b.closeConn = err, true // on the next Read
			}
		}
	}
	return n, nil
}

// frame reads framing until data is due or the body ended (io.EOF) or
// failed. With wait false it stops at framing not yet whole in the buffer.
func (b *upstreamBody[C]) frame(wait bool) error {
	for {
		switch b.state {
		case bodyDone:
			return io.EOF
		case bodyLength, bodyToClose, bodyChunkData:
			return nil
		case bodyChunkEnd:
			if ok, err := b.has(2, wait); !ok {
				return err
			}
			if err := b.frameEnd(); err != nil {
				return err
			}
		case bodyChunkSize:
			line, err := b.line(wait)
			if line == nil {
				return err
			}
			size, err := parseChunkSize(line)
			if err != nil {
				return err
			}
			b.left, b.state = size, bodyChunkData
			if size == 0 {
				b.state = bodyTrailers
			}
		case bodyTrailers:
			line, err := b.line(wait)
			if line == nil {
				return err
			}
			if len(line) == 2 {
				b.state = bodyDone
				return b.ended()
			}
			b.trailer += len(line)
			if b.trailer > maxTrailerBytes {
				return errTrailerSize
			}
			if !validTrailer(line) {
				return errTrailer
			}
			b.closeConn = true // trailers are never forwarded: nor is this connection reused
		}
	}
}

// frameEnd takes the CRLF after a chunk's data, buffered.
func (b *upstreamBody[C]) frameEnd() error {
	if (*b.buf)[b.r] != '\r' || (*b.buf)[b.r+1] != '\n' {
		return errChunkEnd
	}
	b.r += 2
	b.state = bodyChunkSize
	return nil
}

// ended is the clean end of the body: io.EOF. Bytes already read past it
// belong to no exchange: the connection is closed instead of reused.
func (b *upstreamBody[C]) ended() error {
	if b.r < b.w {
		b.closeConn = true
	}
	return io.EOF
}

// has reports whether n bytes are buffered, reading (wait) until they
// are; when not, the read's failure (nil when it did not wait).
func (b *upstreamBody[C]) has(n int, wait bool) (bool, error) {
	for b.w-b.r < n {
		if !wait {
			return false, nil
		}
		if err := b.fill(); err != nil {
			return false, err
		}
	}
	return true, nil
}

// line returns the next line (with its CRLF), reading (wait) until it is
// whole; nil and the failure (nil when it did not wait) otherwise. A line
// must end in CRLF and fit the buffer.
func (b *upstreamBody[C]) line(wait bool) ([]byte, error) {
	scanned := 0
	for {
		if b.buf != nil {
			if i := bytes.IndexByte((*b.buf)[b.r+scanned:b.w], '\n'); i >= 0 {
				end := b.r + scanned + i + 1
				line := (*b.buf)[b.r:end]
				if len(line) < 2 || line[len(line)-2] != '\r' {
					return nil, errBareLF
				}
				b.r = end
				return line, nil
			}
			scanned = b.w - b.r
			if scanned >= bodyBufSize {
				return nil, errBodyLine
			}
		}
		if !wait {
			return nil, nil
		}
		if err := b.fill(); err != nil {
			return nil, err
		}
	}
}

// fill reads more bytes into the buffer (lent: taken only once the socket
// has bytes). The body ending here is cut short.
func (b *upstreamBody[C]) fill() error {
	if b.buf != nil && b.r > 0 {
		b.w = copy(*b.buf, (*b.buf)[b.r:b.w])
		b.r = 0
	}
	var n int
	var err error
	if b.dc != nil {
		n, err = b.dc.readLent(b)
	} else {
		n, err = b.conn.Read(b.Lend())
	}
	b.w += n
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Lend is the rawconn.Lender side of fill: the buffer's free part.
func (b *upstreamBody[C]) Lend() []byte {
	if b.buf == nil {
		b.buf = takeBodyBuf()
		b.r, b.w = 0, 0
	}
	return (*b.buf)[b.w:]
}

// Unlend takes back a lent buffer that holds nothing.
func (b *upstreamBody[C]) Unlend() { b.drop() }

// drop returns the buffer to bodyBufs when nothing waits in it.
func (b *upstreamBody[C]) drop() {
	if b.buf != nil && b.r == b.w {
		giveBodyBuf(b.buf)
		b.buf, b.r, b.w = nil, 0, 0
	}
}

// parseChunkSize parses a chunk size line (with its CRLF): hex digits,
// then optional whitespace and chunk extensions (";" and anything but
// control characters).
func parseChunkSize(line []byte) (int64, error) {
	line = line[:len(line)-2]
	var n int64
	i := 0
	for ; i < len(line); i++ {
		d := unhex(line[i])
		if d < 0 {
			break
		}
		if n > maxChunkSize>>4 {
			return 0, errChunkOverflow
		}
		n = n<<4 | int64(d)
	}
	if i == 0 {
		return 0, errChunkSize
	}
	for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
		i++
	}
	if i == len(line) {
		return n, nil
	}
	if line[i] != ';' {
		return 0, errChunkSize
	}
	for _, c := range line[i:] {
		if c < ' ' && c != '\t' || c == 0x7f {
			return 0, errChunkSize
		}
	}
	return n, nil
}

// validTrailer reports whether line (with its CRLF) is a header field: a
// token name, a colon, and a value without control characters.
func validTrailer(line []byte) bool {
	line = line[:len(line)-2]
	name, value, ok := bytes.Cut(line, []byte(":"))
	if !ok || len(name) == 0 {
		return false
	}
	for _, c := range name {
		if c <= ' ' || c >= 0x7f || bytes.IndexByte([]byte(`"(),/:;<=>?@[\]{}`), c) >= 0 {
			return false
		}
	}
	for _, c := range value {
		if c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// CloseWithError releases the body, once: the connection goes back to the
// pool when the body was read to its end, err is nil and nothing forbids
// it (closeConn), else it is closed (a request still generating on the
// model server is aborted with it). fasthttp's Response.CloseBodyStream
// calls it.
func (b *upstreamBody[C]) CloseWithError(err error) error {
	if b.closed {
		return nil
	}
	b.closed = true
	if b.buf != nil {
		giveBodyBuf(b.buf)
	}
	if err != nil || b.err != io.EOF || b.closeConn {
		b.pool.close(b.hc, b.cc)
	} else {
		b.pool.release(b.hc, b.cc)
	}
	pool := b.pool
	*b = upstreamBody[C]{pool: pool}
	pool.pool.Put(b)
	return nil
}
