package route

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// A backend's broken or trailing framing never reaches another exchange.
// Each backend here answers an SSE stream whose first frame is sound and
// whose framing then goes wrong, all in one write (so that what follows
// the break is read with it, not left on the socket for the reuse check).
// A broken body ends the client's stream with the 502 error frame and none
// of the bytes after the break; a sound body with trailers or stray bytes
// after its last chunk reaches the client whole. Either way the connection
// is closed: three requests, three upstream connections.
func TestHostileBodyFramingNeverReachesAnotherExchange(t *testing.T) {
	const first = "d\r\ndata: first\n\n\r\n"
	cases := []struct {
		name     string
		answer   string
		never    string // what the client must not get: the bytes after the break
		complete bool   // the client gets the first frame and a clean end
	}{
		{"size_not_hex", hhSSEHead + first + "5x\r\nhello\r\n0\r\n\r\n", "hello", false},
		{"size_overflows", hhSSEHead + first + "10000000000000005\r\nhello\r\n0\r\n\r\n", "hello", false},
		{"size_line_bare_lf", hhSSEHead + first + "5\nhello\r\n0\r\n\r\n", "hello", false},
		{"data_without_crlf", hhSSEHead + first + "5\r\nhelloXX5\r\nworld\r\n0\r\n\r\n", "world", false},
		{"trailer_not_a_field", hhSSEHead + first + "0\r\nHTTP/1.1 200 OK\r\n\r\n", "HTTP/1.1", false},
		{"trailers", hhSSEHead + first + "0\r\nX-Checksum: 1\r\n\r\n", "X-Checksum", true},
		{"bytes_after_last_chunk", hhSSEHead + first + "0\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstray", "stray", true},
		{"bytes_after_content_length", "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 13\r\n\r\ndata: first\n\n" +
			"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstray", "stray", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			be := startRawBackend(t, func(c net.Conn, _ int, _ []byte) bool {
				_, err := io.WriteString(c, tc.answer)
				return err == nil
			})
			cfg := testConfig(be.url())
			cfg.Breaker.ConsecutiveFailures = 100 // the breaker is not under test
			tp := startProxy(t, cfg)
			for i := range 3 {
				r := rawDo(t, tp.addr, hhReq)
				if r.status != 200 || !strings.HasPrefix(r.body, "data: first\n\n") {
					t.Fatalf("request %d: %d %q, want 200 and the first frame", i, r.status, r.body)
				}
				if strings.Contains(r.body, tc.never) {
					t.Fatalf("request %d: %q reached the client: %q", i, tc.never, r.body)
				}
				if tc.complete && r.body != "data: first\n\n" {
					t.Fatalf("request %d: %q, want the first frame alone", i, r.body)
				}
				if !tc.complete && !strings.Contains(r.body, `"code":502`) {
					t.Fatalf("request %d: %q, want the 502 error frame after the first", i, r.body)
				}
			}
			be.mu.Lock()
			conns := len(be.conns)
			be.mu.Unlock()
			if conns != 3 {
				t.Fatalf("%d upstream connections for 3 requests, want 3: one was reused after its framing", conns)
			}
		})
	}
}

// trickleConn hands out what r holds one byte per Read.
type trickleConn struct {
	net.Conn
	r io.Reader
}

func (c *trickleConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return c.r.Read(p[:1])
}

// testHandle is a connHandle for bodies made outside a HostClient.
type testHandle struct{ c net.Conn }

func (h testHandle) Conn() net.Conn { return h.c }

// testBodies makes bodies whose close records how the connection went.
func testBodies(released, closed *int) *bodyPool[testHandle] {
	return newBodyPool(func(*fasthttp.HostClient, testHandle) { *released++ },
		func(*fasthttp.HostClient, testHandle) { *closed++ })
}

// decodeAll reads a body of framing size from wire, which arrives one byte
// per read (head already taken: buffered is what the head's reader had
// past it), with reads of room bytes, and returns what it read, whether
// the connection would be reused, and how the body ended. Every buffer it
// took is back when it is closed.
func decodeAll(t *testing.T, size int, buffered, wire string, room int) (string, bool, error) {
	t.Helper()
	var released, closed int
	held := bodyBufsHeld.Load()
	pool := testBodies(&released, &closed)
	b := pool.get()
	conn := &trickleConn{r: strings.NewReader(wire)}
	b.conn, b.cc = conn, testHandle{conn}
	br := bufio.NewReaderSize(strings.NewReader(buffered), 64)
	if buffered != "" {
		_, _ = br.Peek(len(buffered))
	}
	b.start(size, br)
	var got []byte
	var err error
	for range 10000 {
		var n int
		p := make([]byte, room)
		if _, err = b.Read(nil); err == nil {
			n, err = b.Read(p)
		}
		got = append(got, p[:n]...)
		if err != nil {
			break
		}
	}
	_ = b.CloseWithError(nil)
	if n := bodyBufsHeld.Load(); n != held {
		t.Fatalf("%d body buffers not returned", n-held)
	}
	if released+closed != 1 {
		t.Fatalf("connection released %d, closed %d times", released, closed)
	}
	return string(got), released == 1, err
}

// The decoder reads sound framing whatever the reads' sizes and however
// the bytes arrive, and gives the connection back only after a clean end
// with nothing past it.
func TestUpstreamBodyDecodesSoundFraming(t *testing.T) {
	cases := []struct {
		name     string
		size     int
		buffered string // read with the head
		wire     string
		want     string
		reuse    bool
	}{
		{"chunked", -1, "", "5\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\n\r\n", "hello world", true},
		{"chunked_with_the_head", -1, "5\r\nhel", "lo\r\n0\r\n\r\n", "hello", true},
		{"hex_cases_zeros_extensions_ows", -1, "", "00A;name=\"v\"\r\n0123456789\r\n0b \r\n0123456789a\r\n0 ;x\r\n\r\n", "01234567890123456789a", true},
		{"content_length", 11, "hello", " world", "hello world", true},
		{"content_length_zero", 0, "", "", "", true},
		{"until_close", -2, "hel", "lo", "hello", false},
		{"trailers", -1, "", "5\r\nhello\r\n0\r\nA: 1\r\nB-c:\r\n\r\n", "hello", false},
	}
	for _, tc := range cases {
		for _, room := range []int{1, 3, 64, 32 << 10} {
			got, reused, err := decodeAll(t, tc.size, tc.buffered, tc.wire, room)
			if got != tc.want || err != io.EOF || reused != tc.reuse {
				t.Fatalf("%s, reads of %d: %q, %v, reused %v; want %q, EOF, reused %v", tc.name, room, got, err, reused, tc.want, tc.reuse)
			}
		}
	}
}

// Broken framing fails the body at the break, with the data before it,
// and the connection is closed.
func TestUpstreamBodyRejectsBrokenFraming(t *testing.T) {
	long := strings.Repeat("a", bodyBufSize)
	cases := []struct {
		name string
		size int
		wire string
		want string
		err  error
	}{
		{"size_not_hex", -1, "5x\r\nhello\r\n0\r\n\r\n", "", errChunkSize},
		{"size_empty", -1, "\r\nhello\r\n0\r\n\r\n", "", errChunkSize},
		{"size_space_inside", -1, "5 5\r\nhello\r\n0\r\n\r\n", "", errChunkSize},
		{"size_control_in_extension", -1, "5;a\x01\r\nhello\r\n0\r\n\r\n", "", errChunkSize},
		{"size_overflows", -1, "10000000000000005\r\nhello\r\n0\r\n\r\n", "", errChunkOverflow},
		{"size_line_bare_lf", -1, "5\nhello\r\n0\r\n\r\n", "", errBareLF},
		{"size_line_bare_cr", -1, "5\rhello\r\n0\r\n\r\n", "", errChunkSize},
		{"size_line_too_long", -1, "5;" + long + "\r\nhello\r\n0\r\n\r\n", "", errBodyLine},
		{"data_without_crlf", -1, "5\r\nhelloXX5\r\nworld\r\n0\r\n\r\n", "hello", errChunkEnd},
		{"data_with_bare_lf", -1, "5\r\nhello\n0\r\n\r\n", "hello", errChunkEnd},
		{"last_chunk_bare_lf", -1, "5\r\nhello\r\n0\r\n\n", "hello", errBareLF},
		{"trailer_not_a_field", -1, "0\r\nHTTP/1.1 200 OK\r\n\r\n", "", errTrailer},
		{"trailer_name_space", -1, "0\r\nX Y: 1\r\n\r\n", "", errTrailer},
		{"trailers_too_large", -1, "0\r\n" + strings.Repeat("X: "+strings.Repeat("v", 100)+"\r\n", 50) + "\r\n", "", errTrailerSize},
		{"cut_in_size_line", -1, "5", "", io.ErrUnexpectedEOF},
		{"cut_in_chunk", -1, "5\r\nhel", "hel", io.ErrUnexpectedEOF},
		{"cut_before_last_chunk", -1, "5\r\nhello\r\n", "hello", io.ErrUnexpectedEOF},
		{"cut_in_trailers", -1, "0\r\nA: 1\r\n", "", io.ErrUnexpectedEOF},
		{"cut_content_length", 10, "hello", "hello", io.ErrUnexpectedEOF},
	}
	for _, tc := range cases {
		for _, room := range []int{1, 64, 32 << 10} {
			got, reused, err := decodeAll(t, tc.size, "", tc.wire, room)
			if got != tc.want || !errors.Is(err, tc.err) || reused {
				t.Fatalf("%s, reads of %d: %q, %v, reused %v; want %q, %v, closed", tc.name, room, got, err, reused, tc.want, tc.err)
			}
		}
	}
}

// Bytes read past a body's end (with its last chunk, or with the head of
// a Content-Length body) close the connection.
func TestUpstreamBodyBytesPastTheEndCloseTheConnection(t *testing.T) {
	for _, tc := range []struct {
		name           string
		size           int
		buffered, wire string
		want           string
	}{
		{"after_last_chunk", -1, "5\r\nhello\r\n0\r\n\r\nX", "", "hello"},
		{"after_content_length", 5, "helloX", "", "hello"},
		{"zero_length_then_bytes", 0, "X", "", ""},
	} {
		got, reused, err := decodeAll(t, tc.size, tc.buffered, tc.wire, 64)
		if got != tc.want || err != io.EOF || reused {
			t.Fatalf("%s: %q, %v, reused %v; want %q, EOF, closed", tc.name, got, err, reused, tc.want)
		}
	}
}
