package route

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// rawBackend is a fake model server on raw sockets. It logs every byte it
// receives, per connection, and answers each request it parses with what
// respond writes, byte for byte (respond may also write later, sleep, or
// return false to close the connection).
type rawBackend struct {
	ln      net.Listener
	scheme  string // "http", or "https" over a TLS listener
	respond func(c net.Conn, n int, head []byte) bool

	mu    sync.Mutex
	conns []*bytes.Buffer // every byte received, one buffer per connection
	open  map[net.Conn]bool
	heads [][]byte // request heads in arrival order
	wg    sync.WaitGroup
}

func startRawBackend(t testing.TB, respond func(c net.Conn, n int, head []byte) bool) *rawBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return startRawBackendOn(t, ln, "http", respond)
}

// startRawBackendOn is startRawBackend on listener ln, whose URLs have
// scheme.
func startRawBackendOn(t testing.TB, ln net.Listener, scheme string, respond func(c net.Conn, n int, head []byte) bool) *rawBackend {
	t.Helper()
	u := &rawBackend{ln: ln, scheme: scheme, respond: respond, open: map[net.Conn]bool{}}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.wg.Add(1)
			go func() { defer u.wg.Done(); u.serve(c) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		u.mu.Lock()
		for c := range u.open {
			c.Close()
		}
		u.mu.Unlock()
		u.wg.Wait()
	})
	return u
}

// url is the backend's base URL.
func (u *rawBackend) url() string { return u.scheme + "://" + u.ln.Addr().String() }

// logWriter appends what the connection reads to its log.
type logWriter struct {
	u   *rawBackend
	buf *bytes.Buffer
}

func (w logWriter) Write(p []byte) (int, error) {
	w.u.mu.Lock()
	defer w.u.mu.Unlock()
	return w.buf.Write(p)
}

func (u *rawBackend) serve(c net.Conn) {
	defer c.Close()
	buf := new(bytes.Buffer)
	u.mu.Lock()
	u.conns = append(u.conns, buf)
	u.open[c] = true
	u.mu.Unlock()
	defer func() { u.mu.Lock(); delete(u.open, c); u.mu.Unlock() }()
	br := bufio.NewReader(io.TeeReader(c, logWriter{u, buf}))
	for {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		var head []byte
		cl := 0
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				return
			}
			head = append(head, line...)
			if k, v, ok := bytes.Cut(bytes.TrimRight(line, "\r\n"), []byte(":")); ok && strings.EqualFold(string(k), "content-length") {
				cl, _ = strconv.Atoi(strings.TrimSpace(string(v)))
			}
			if len(bytes.TrimRight(line, "\r\n")) == 0 {
				break
			}
		}
		if _, err := io.CopyN(io.Discard, br, int64(cl)); err != nil {
			return
		}
		u.mu.Lock()
		u.heads = append(u.heads, head)
		n := len(u.heads)
		u.mu.Unlock()
		if !u.respond(c, n, head) {
			return
		}
	}
}

// requests returns the request heads received so far, but for the
// proxy's own scrapes and probes (/metrics, /load).
func (u *rawBackend) requests() [][]byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	var hs [][]byte
	for _, h := range u.heads {
		if !bytes.HasPrefix(h, []byte("GET /metrics ")) && !bytes.HasPrefix(h, []byte("GET /load ")) {
			hs = append(hs, h)
		}
	}
	return hs
}

// headerValues returns the values of the header fields of head named name,
// compared case-insensitively.
func headerValues(head []byte, name string) []string {
	var vs []string
	lines := strings.Split(string(head), "\r\n")
	for _, l := range lines[1:] {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.EqualFold(strings.TrimSpace(k), name) {
			vs = append(vs, strings.TrimSpace(v))
		}
	}
	return vs
}

// rawResponse is a raw HTTP exchange with the proxy: the status code, the
// header lines as written, and the body.
type rawResponse struct {
	status int
	head   string
	body   string
}

// rawDo writes req on a fresh connection and reads one response (Content-
// Length or chunked, via net/http's reader) and its raw head. Its bound is
// 30 s, above testConfig's upstream timeouts: at 5 s (until session 15)
// requests of many MiB (TestAnswerBeforeTheBodyReachesTheClient,
// TestChunkExtensionsAreBounded) got "i/o timeout" in a starved -race
// process, though the proxy was answering as it should.
func rawDo(t testing.TB, addr, req string) rawResponse {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	var raw bytes.Buffer
	br := bufio.NewReader(io.TeeReader(c, &raw))
	// The request's method frames the answer: a HEAD answer has no body
	// whatever its Content-Length says (read as a GET's, it would wait
	// for the connection's deadline).
	method, _, _ := strings.Cut(req, " ")
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		return rawResponse{}
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if method == "HEAD" {
		// Whatever follows a HEAD answer's head is reported as its body:
		// bytes the proxy must never send.
		_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		b, _ = io.ReadAll(br)
	}
	head, _, _ := strings.Cut(raw.String(), "\r\n\r\n")
	return rawResponse{status: resp.StatusCode, head: head, body: string(b)}
}

// connLogs returns the bytes received on each connection.
func (u *rawBackend) connLogs() [][]byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	var ls [][]byte
	for _, b := range u.conns {
		ls = append(ls, append([]byte(nil), b.Bytes()...))
	}
	return ls
}

func itoa(n int) string { return strconv.Itoa(n) }
