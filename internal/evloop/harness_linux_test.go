//go:build linux

package evloop

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is the loops' injected clock: time moves only when a test
// advances it (loops read it at least every 10 ms).
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(int64(time.Second))
	return c
}

func (c *fakeClock) now() int64              { return c.ns.Load() }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// keepMoving advances c by step every 20 ms of real time until the test
// ends: a deadline counted from an event the test cannot order against
// its own advance (an accept) is then passed whenever that event comes.
func (c *fakeClock) keepMoving(t testing.TB, step time.Duration) {
	stop := make(chan struct{})
	done := make(chan struct{})
	t.Cleanup(func() { close(stop); <-done })
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				c.advance(step)
			}
		}
	}()
}
func envelopeResponse(status int) []byte { return []byte(envelope(status)) }
func addrOf(t testing.TB, a net.Addr) netip.AddrPort {
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		panic(err)
	}
	return ap
}

// envelope is the test's stand-in for route's error answer: vLLM's JSON
// envelope with "Connection: close".
func envelope(status int) string {
	body := fmt.Sprintf(`{"error":{"message":"refused %d","type":"BadRequestError","param":null,"code":%d}}`, status, status)
	return fmt.Sprintf("HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", status, len(body), body)
}

// checkEnvelope fails unless body is the error envelope for status.
func checkEnvelope(t *testing.T, status int, body []byte) {
	t.Helper()
	var e struct {
		Error struct {
			Message string          `json:"message"`
			Type    string          `json:"type"`
			Param   json.RawMessage `json:"param"`
			Code    int             `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Code != status || string(e.Error.Param) != "null" || e.Error.Type == "" {
		t.Fatalf("body %q is not the error envelope for %d (%v)", body, status, err)
	}
}

// upReq is a request as a test upstream received it.
type upReq struct {
	method, path string
	header       http.Header
	body         string
	conn         int // which upstream connection (from 1)
}

// testUpstream is a scripted upstream: serve answers one request on
// connection n (from 1); the default answers 200 with "ok:<path>".
type testUpstream struct {
	t     *testing.T
	ln    net.Listener
	n     atomic.Int32
	reqs  chan upReq
	serve func(c net.Conn, n int, r upReq) bool
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

// startSilentUpstream starts an upstream that never answers: it reads
// after the request and closes the returned channel when that read sees
// EOF (the loop closed the upstream connection).
func startSilentUpstream(t *testing.T) (*testUpstream, chan struct{}) {
	t.Helper()
	sawEOF := make(chan struct{})
	up := startUpstream(t, func(c net.Conn, _ int, _ upReq) bool {
		var b [1]byte
		if _, err := c.Read(b[:]); err == io.EOF {
			close(sawEOF)
		}
		return false
	})
	return up, sawEOF
}

func startUpstream(t *testing.T, serve func(c net.Conn, n int, r upReq) bool) *testUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &testUpstream{t: t, ln: ln, reqs: make(chan upReq, 1024), serve: serve}
	if u.serve == nil {
		u.serve = answerOK
	}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := int(u.n.Add(1))
			u.mu.Lock()
			u.conns = append(u.conns, c)
			u.mu.Unlock()
			u.wg.Add(1)
			go func() {
				defer u.wg.Done()
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					hr, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					b, _ := io.ReadAll(hr.Body)
					r := upReq{method: hr.Method, path: hr.URL.RequestURI(), header: hr.Header, body: string(b), conn: n}
					u.reqs <- r
					if !u.serve(c, n, r) {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(u.stop)
	return u
}

func (u *testUpstream) stop() {
	u.ln.Close()
	u.mu.Lock()
	for _, c := range u.conns {
		c.Close()
	}
	u.mu.Unlock()
	u.wg.Wait()
}

func (u *testUpstream) addr() netip.AddrPort { return addrOf(u.t, u.ln.Addr()) }

// next returns the next request the upstream received.
func (u *testUpstream) next(t *testing.T) upReq {
	t.Helper()
	select {
	case r := <-u.reqs:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("upstream got no request")
	}
	return upReq{}
}

// none fails if the upstream received a request.
func (u *testUpstream) none(t *testing.T) {
	t.Helper()
	select {
	case r := <-u.reqs:
		t.Fatalf("upstream got %s %s", r.method, r.path)
	default:
	}
}

func answerOK(c net.Conn, _ int, r upReq) bool {
	body := "ok:" + r.path
	_, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nKeep-Alive: timeout=5\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
	return err == nil
}

// testHandler routes every request to up, adds X-Forwarded-For from its
// scratch buffer and removes X-Drop; route and retry override.
type testHandler struct {
	up    netip.AddrPort
	route func(r *Request, d *Decision)
	retry func(res *Result, d *Decision) bool
	done  chan Result
}

func newHandler(up netip.AddrPort) *testHandler {
	return &testHandler{up: up, done: make(chan Result, 1024)}
}

func (h *testHandler) Route(r *Request, d *Decision) {
	d.Upstream = h.up
	d.Scratch = append(d.Scratch, r.Remote.Addr().String()...)
	d.Set = append(d.Set, Header{Name: "X-Forwarded-For", Value: d.Scratch})
	d.Del = append(d.Del, "x-drop")
	if h.route != nil {
		h.route(r, d)
	}
}

func (h *testHandler) Done(_ *Request, res *Result, retry *Decision) bool {
	h.done <- *res
	if h.retry != nil && res.Retryable {
		return h.retry(res, retry)
	}
	return false
}

func (h *testHandler) result(t *testing.T) Result {
	t.Helper()
	select {
	case r := <-h.done:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("handler heard no outcome")
	}
	return Result{}
}

// startLoop starts a one-loop server with test limits and a fake clock.
func startLoop(t *testing.T, h Handler, clk *fakeClock, mod func(*Config)) *Server {
	t.Helper()
	cfg := Config{
		Addr: "127.0.0.1:0", Loops: 1, Handler: h,
		Fallback:      func(c net.Conn) { c.Close() },
		ErrorResponse: envelopeResponse,
		MaxHeadBytes:  4096, MaxHeaders: 32, MaxBodyBytes: 64 << 10, MaxIdlePerUpstream: 8,
		ReadTimeout: 5 * time.Second, IdleTimeout: 60 * time.Second, FirstByteTimeout: 10 * time.Second,
		ReadIdleTimeout: 10 * time.Second, IdleConnTTL: 4 * time.Second,
		Clock: clk.now,
	}
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// client is a raw-socket client.
type client struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dial(t *testing.T, s *Server) *client {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	t.Cleanup(func() { c.Close() })
	return &client{t: t, c: c, br: bufio.NewReader(c)}
}

func (c *client) send(s string) {
	c.t.Helper()
	if _, err := io.WriteString(c.c, s); err != nil {
		c.t.Fatal(err)
	}
}

// response reads one response: status, headers, body.
func (c *client) response() (int, http.Header, []byte) {
	c.t.Helper()
	r, err := http.ReadResponse(c.br, nil)
	if err != nil {
		c.t.Fatalf("reading a response: %v", err)
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		c.t.Fatalf("reading a body: %v", err)
	}
	if r.Close {
		r.Header.Set("Connection", "close") // net/http keeps it out of Header
	}
	return r.StatusCode, r.Header, b
}

// closed fails unless the server closes the connection with no more bytes.
func (c *client) closed() {
	c.t.Helper()
	b, err := io.ReadAll(c.br)
	if err != nil && !strings.Contains(err.Error(), "reset") {
		c.t.Fatalf("waiting for the close: %v", err)
	}
	if len(b) > 0 {
		c.t.Fatalf("got %q before the close", b)
	}
}

func post(path, body string, extra ...string) string {
	return "POST " + path + " HTTP/1.1\r\nHost: x\r\n" + strings.Join(extra, "") + "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}
