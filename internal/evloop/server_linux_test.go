//go:build linux

package evloop

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Three requests on one client connection are served in order on one
// upstream keep-alive connection; hop-by-hop headers (and those the
// client's Connection names) never reach the upstream, the handler's
// additions and removals do, and every attempt is reported once.
func TestKeepAliveExchangesShareOneUpstreamConnection(t *testing.T) {
	up := startUpstream(t, nil)
	h := newHandler(up.addr())
	s := startLoop(t, h, newFakeClock(), nil)
	c := dial(t, s)
	for i := range 3 {
		path := "/v1/completions?i=" + strconv.Itoa(i)
		c.send(post(path, `{"model":"m"}`, "Connection: keep-alive, X-Secret\r\nX-Secret: s\r\nX-Drop: d\r\nX-Keep: k\r\nX-Forwarded-For: 6.6.6.6\r\nTE: trailers\r\n"))
		status, hdr, body := c.response()
		if status != 200 || string(body) != "ok:"+path || hdr.Get("Keep-Alive") != "" {
			t.Fatalf("request %d: %d %q %v", i, status, body, hdr)
		}
		r := up.next(t)
		if r.conn != 1 || r.body != `{"model":"m"}` || r.path != path {
			t.Fatalf("request %d reached upstream as %+v", i, r)
		}
		for _, name := range []string{"Connection", "X-Secret", "X-Drop", "Te"} {
			if v := r.header.Get(name); v != "" {
				t.Fatalf("request %d: upstream got %s: %q", i, name, v)
			}
		}
		if r.header.Get("X-Keep") != "k" || r.header.Values("X-Forwarded-For")[0] != "127.0.0.1" || len(r.header.Values("X-Forwarded-For")) != 1 {
			t.Fatalf("request %d: upstream headers %v", i, r.header)
		}
		res := h.result(t)
		if res.Status != 200 || res.Err != nil || res.Reused != (i > 0) || res.ResponseBytes == 0 || res.RequestBytes == 0 {
			t.Fatalf("request %d: outcome %+v", i, res)
		}
	}
	if n := up.n.Load(); n != 1 {
		t.Fatalf("%d upstream connections for 3 keep-alive exchanges", n)
	}
}

// Every limit and every framing ambiguity is refused with the caller's
// error envelope, and nothing reaches the upstream.
func TestRefusalsAnswerTheEnvelope(t *testing.T) {
	big := strings.Repeat("a", 5000)
	many := strings.Repeat("X-A: 1\r\n", 40)
	cases := []struct {
		name, req string
		status    int
	}{
		{"head over the limit", "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + big + "\r\n\r\n", 431},
		{"head over the limit, no end yet", "GET / HTTP/1.1\r\nX-Big: " + big, 431},
		{"too many headers", "GET / HTTP/1.1\r\nHost: x\r\n" + many + "\r\n", 431},
		{"body over the limit", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 70000\r\n\r\n", 413},
		{"HTTP/2.0", "GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505},
		{"bare LF", "GET / HTTP/1.1\nHost: x\n\n", 400},
		{"white space before the colon", "GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400},
		{"obs-fold", "GET / HTTP/1.1\r\nHost: x\r\n X-A: 1\r\n\r\n", 400},
		{"two lengths", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400},
		{"signed length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +1\r\n\r\na", 400},
		{"no host", "GET / HTTP/1.1\r\n\r\n", 400},
		{"two hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},
		{"control byte in a value", "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n", 400},
		{"handler refuses", post("/v1/nope", "{}"), 404},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			up := startUpstream(t, nil)
			h := newHandler(up.addr())
			h.route = func(r *Request, d *Decision) {
				if string(r.Target()) == "/v1/nope" {
					d.Status = 404
				}
			}
			s := startLoop(t, h, newFakeClock(), nil)
			c := dial(t, s)
			c.send(tc.req)
			status, hdr, body := c.response()
			if status != tc.status || hdr.Get("Connection") != "close" {
				t.Fatalf("got %d %v, want %d and a close", status, hdr, tc.status)
			}
			checkEnvelope(t, tc.status, body)
			c.closed()
			up.none(t)
		})
	}
}

// A request smuggled behind one framed both ways (Content-Length and
// Transfer-Encoding) never reaches the upstream: the carrier is refused
// and the connection closed. A plain pipeline is served in order.
func TestHostilePipelineIsRefusedAndPlainPipelineServedInOrder(t *testing.T) {
	up := startUpstream(t, nil)
	s := startLoop(t, newHandler(up.addr()), newFakeClock(), nil)

	c := dial(t, s)
	smuggled := "GET /admin HTTP/1.1\r\nHost: x\r\n\r\n"
	c.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled)
	status, _, body := c.response()
	if status != 400 {
		t.Fatalf("CL+TE carrier: %d", status)
	}
	checkEnvelope(t, 400, body)
	c.closed()
	up.none(t)

	c = dial(t, s)
	c.send(post("/a", "1") + post("/b", "22") + post("/c", "333"))
	for _, p := range []string{"/a", "/b", "/c"} {
		if status, _, body := c.response(); status != 200 || string(body) != "ok:"+p {
			t.Fatalf("pipelined %s: %d %q", p, status, body)
		}
		if r := up.next(t); r.path != p {
			t.Fatalf("upstream got %s, want %s", r.path, p)
		}
	}
}

// Bytes after a response's Content-Length in the same read forbid the
// connection's reuse, and bytes arriving later on an idle pooled
// connection retire it: in both cases the next request gets a clean
// answer on a new upstream connection.
func TestStrayBytesRetireTheUpstreamConnection(t *testing.T) {
	for _, when := range []string{"same_read", "later"} {
		t.Run(when, func(t *testing.T) {
			strayed := make(chan struct{})
			up := startUpstream(t, func(c net.Conn, n int, r upReq) bool {
				if n > 1 || r.path != "/first" {
					return answerOK(c, n, r)
				}
				if when == "same_read" {
					_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nPOISON")
					return true
				}
				answerOK(c, n, r)
				time.Sleep(50 * time.Millisecond)
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nPOISON")
				close(strayed)
				return true
			})
			s := startLoop(t, newHandler(up.addr()), newFakeClock(), nil)
			c := dial(t, s)
			c.send(post("/first", "x"))
			if status, _, _ := c.response(); status != 200 {
				t.Fatalf("first: %d", status)
			}
			up.next(t)
			if when == "later" {
				<-strayed
				time.Sleep(50 * time.Millisecond) // the stray bytes reach the loop's socket
			}
			c.send(post("/second", "y"))
			status, _, body := c.response()
			if status != 200 || string(body) != "ok:/second" {
				t.Fatalf("second: %d %q", status, body)
			}
			if r := up.next(t); r.conn != 2 {
				t.Fatalf("second request went on upstream connection %d, want a new one", r.conn)
			}
		})
	}
}

// A client that hangs up while its request is at the upstream makes the
// loop close that upstream connection (the upstream sees EOF before it
// answers), and the attempt is reported as 499, client gone.
func TestClientHangUpClosesTheUpstream(t *testing.T) {
	up, sawEOF := startSilentUpstream(t)
	h := newHandler(up.addr())
	s := startLoop(t, h, newFakeClock(), nil)
	c := dial(t, s)
	c.send(post("/v1/completions", "{}"))
	up.next(t)
	c.c.Close()
	select {
	case <-sawEOF:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream connection stayed open after the client hung up")
	}
	if res := h.result(t); res.Status != 499 || !errors.Is(res.Err, ErrClientGone) {
		t.Fatalf("outcome %+v", res)
	}
}

// Each timeout fires on the injected clock: the request read (408), the
// keep-alive idle wait (close), the upstream's first byte (504) and its
// silence mid-response (the client's connection is cut).
func TestTimeoutsOnTheInjectedClock(t *testing.T) {
	t.Run("read", func(t *testing.T) {
		clk := newFakeClock()
		s := startLoop(t, newHandler(startUpstream(t, nil).addr()), clk, nil)
		c := dial(t, s)
		c.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
		// The accept may come after an advance (the deadline is then
		// counted from it): keep time moving until the answer.
		clk.keepMoving(t, 6*time.Second)
		status, _, body := c.response()
		if status != 408 {
			t.Fatalf("slow head: %d", status)
		}
		checkEnvelope(t, 408, body)
	})
	t.Run("idle", func(t *testing.T) {
		clk := newFakeClock()
		s := startLoop(t, newHandler(startUpstream(t, nil).addr()), clk, nil)
		c := dial(t, s)
		c.send(post("/a", "1"))
		if status, _, _ := c.response(); status != 200 {
			t.Fatal(status)
		}
		clk.advance(30 * time.Second)
		time.Sleep(30 * time.Millisecond) // several loop turns: still open
		c.send(post("/b", "1"))
		if status, _, _ := c.response(); status != 200 {
			t.Fatal(status)
		}
		clk.advance(61 * time.Second)
		c.closed()
	})
	t.Run("first_byte", func(t *testing.T) {
		clk := newFakeClock()
		up, sawEOF := startSilentUpstream(t)
		h := newHandler(up.addr())
		s := startLoop(t, h, clk, nil)
		c := dial(t, s)
		c.send(post("/a", "1"))
		up.next(t)
		clk.advance(11 * time.Second)
		status, _, body := c.response()
		if status != 504 {
			t.Fatalf("silent upstream: %d", status)
		}
		checkEnvelope(t, 504, body)
		<-sawEOF
		if res := h.result(t); res.Status != 504 || !errors.Is(res.Err, ErrFirstByteTimeout) || res.Retryable {
			t.Fatalf("outcome %+v", res)
		}
	})
	t.Run("read_idle", func(t *testing.T) {
		clk := newFakeClock()
		stall := make(chan struct{})
		up := startUpstream(t, func(c net.Conn, _ int, _ upReq) bool {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf")
			<-stall
			return false
		})
		defer close(stall)
		h := newHandler(up.addr())
		s := startLoop(t, h, clk, nil)
		c := dial(t, s)
		c.send(post("/a", "1"))
		r, err := http.ReadResponse(c.br, nil)
		if err != nil {
			t.Fatal(err)
		}
		var b [4]byte
		if _, err := io.ReadFull(r.Body, b[:]); err != nil {
			t.Fatal(err)
		}
		clk.advance(11 * time.Second)
		if _, err := io.ReadAll(r.Body); err == nil {
			t.Fatal("the cut response read as complete")
		}
		if res := h.result(t); res.Status != 200 || !errors.Is(res.Err, ErrReadTimeout) {
			t.Fatalf("outcome %+v", res)
		}
	})
}

// A request the loop does not serve (chunked body), or that the handler
// hands over, goes to the fallback with every byte already read replayed
// first: a raw-socket client sees one coherent exchange per request
// across the hand-over, and the connection stays with the fallback.
func TestHandOverReplaysTheBytesRead(t *testing.T) {
	for _, shape := range []string{"chunked", "handler"} {
		t.Run(shape, func(t *testing.T) {
			up := startUpstream(t, nil)
			h := newHandler(up.addr())
			h.route = func(r *Request, d *Decision) {
				if string(r.Target()) == "/v1/stream" {
					d.HandOver = true
				}
			}
			got := make(chan string, 4)
			s := startLoop(t, h, newFakeClock(), func(cfg *Config) {
				cfg.Fallback = func(c net.Conn) {
					defer c.Close()
					br := bufio.NewReader(c)
					for {
						r, err := http.ReadRequest(br)
						if err != nil {
							return
						}
						b, _ := io.ReadAll(r.Body)
						got <- r.Method + " " + r.URL.Path + " " + string(b)
						out := "fallback:" + string(b)
						_, _ = io.WriteString(c, "HTTP/1.1 201 Created\r\nContent-Length: "+strconv.Itoa(len(out))+"\r\n\r\n"+out)
					}
				}
			})
			c := dial(t, s)
			c.send(post("/v1/completions", "loop"))
			if status, _, body := c.response(); status != 200 || string(body) != "ok:/v1/completions" {
				t.Fatalf("before the hand-over: %d %q", status, body)
			}
			var second string
			if shape == "chunked" {
				second = "POST /v1/chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
			} else {
				second = post("/v1/stream", `{"stream":true}`)
			}
			// The hand-over request and one after it, in one write.
			c.send(second + post("/v1/after", "tail"))
			want := map[string]string{"chunked": "POST /v1/chunked hello", "handler": `POST /v1/stream {"stream":true}`}[shape]
			for _, w := range []string{want, "POST /v1/after tail"} {
				select {
				case g := <-got:
					if g != w {
						t.Fatalf("fallback got %q, want %q", g, w)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("the fallback never got %q", w)
				}
				if status, _, _ := c.response(); status != 201 {
					t.Fatalf("after the hand-over: %d", status)
				}
			}
			up.next(t)
			up.none(t)
			c.c.Close()
		})
	}
}

// A retryable failure (nothing listening) is reported once per attempt;
// the handler's retry reaches another upstream before any byte went to
// the client.
func TestRetryBeforeTheFirstByte(t *testing.T) {
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := addrOf(t, dead.Addr())
	dead.Close()
	up := startUpstream(t, nil)
	h := newHandler(deadAddr)
	h.retry = func(_ *Result, d *Decision) bool {
		d.Upstream = up.addr()
		return true
	}
	s := startLoop(t, h, newFakeClock(), nil)
	c := dial(t, s)
	c.send(post("/a", "1"))
	if status, _, body := c.response(); status != 200 || string(body) != "ok:/a" {
		t.Fatalf("%d %q", status, body)
	}
	first, second := h.result(t), h.result(t)
	if !errors.Is(first.Err, ErrConnect) || !first.Retryable || first.Upstream != deadAddr || first.Attempt != 0 {
		t.Fatalf("first attempt %+v", first)
	}
	if second.Err != nil || second.Status != 200 || second.Attempt != 1 || second.Upstream != up.addr() {
		t.Fatalf("second attempt %+v", second)
	}
}

// An upstream response the loop cannot relay (chunked, even with a
// Content-Length beside it; or delimited by the close) is a 502 with the
// envelope, reported as ErrBadResponse and not retryable.
func TestUnrelayableResponseIs502(t *testing.T) {
	for name, head := range map[string]string{
		"chunked and a length": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
		"no length":            "HTTP/1.1 200 OK\r\n\r\nuntil the close",
	} {
		t.Run(name, func(t *testing.T) { wantBadResponse(t, head) })
	}
}

// New names every missing field.
func TestNewNamesMissingFields(t *testing.T) {
	_, err := New(Config{Addr: "127.0.0.1:0"})
	if err == nil || !strings.Contains(err.Error(), "Config.Handler") || !strings.Contains(err.Error(), "Config.IdleConnTTL") {
		t.Fatalf("error %v", err)
	}
}
