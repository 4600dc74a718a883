package route

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/config"
)

// Response heads a hostile backend sends before it fails.
const (
	hhSSEHead     = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
	hhChunkedJSON = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
	hhBigJSON     = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 40000\r\n\r\n"
	hhSmallJSON   = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
)

// hhHealthy answers every request with a short SSE stream.
func hhHealthy(t *testing.T) *rawBackend {
	return startRawBackend(t, func(c net.Conn, _ int, _ []byte) bool {
		_, err := io.WriteString(c, hhSSEHead+"a\r\ndata: ok\n\n\r\n0\r\n\r\n")
		return err == nil
	})
}

// hhFails is a backend that sends head (and body, possibly part of it),
// waits pause, then closes the connection, with a reset when rst is set.
func hhFails(t *testing.T, head string, pause time.Duration, rst bool) *rawBackend {
	return startRawBackend(t, func(c net.Conn, _ int, _ []byte) bool {
		_, _ = io.WriteString(c, head)
		time.Sleep(pause)
		if rst {
			_ = c.(*net.TCPConn).SetLinger(0)
		}
		return false
	})
}

var hhShapes = []struct {
	name  string
	head  string
	pause time.Duration
	rst   bool
}{
	{"sse_head_then_close", hhSSEHead, 0, false},
	{"sse_head_then_reset", hhSSEHead, 50 * time.Millisecond, true},
	{"chunked_json_head_then_close", hhChunkedJSON, 0, false},
	{"big_json_head_then_close", hhBigJSON, 0, false},
	{"big_json_head_then_reset", hhBigJSON, 50 * time.Millisecond, true},
	{"small_json_head_then_close", hhSmallJSON, 0, false},
	{"small_json_half_body_then_close", hhSmallJSON + strings.Repeat("x", 50), 0, false},
}

const hhReq = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"

// A backend that fails after its response head and before any byte of the
// body reached the client has answered nothing another pod could not:
// the request is re-picked (upstream.retries, counted as
// retries_total{reason="after_head"}) and the client gets the other pod's
// answer, never an empty 200 or an error frame.
func TestFailureAfterTheHeadIsRetriedElsewhere(t *testing.T) {
	for _, sh := range hhShapes {
		t.Run(sh.name, func(t *testing.T) {
			bad := hhFails(t, sh.head, sh.pause, sh.rst)
			good := hhHealthy(t)
			cfg := testConfig(bad.url(), good.url())
			cfg.Route.Policy = "round_robin"
			tp := startProxy(t, cfg)
			for i := range 4 {
				r := rawDo(t, tp.addr, hhReq)
				if r.status != 200 || r.body != "data: ok\n\n" {
					t.Fatalf("request %d: %d %q, want the healthy pod's 200 stream", i, r.status, r.body)
				}
			}
			hits := float64(len(bad.requests()))
			if hits == 0 {
				t.Fatal("the failing backend got no request: the test tested nothing")
			}
			if got := rtRetries(t, tp, "after_head"); got != hits {
				t.Fatalf("retries_total{reason=after_head} = %v, want %v (one per failed attempt)", got, hits)
			}
		})
	}
}

// With nowhere to go (one backend, or upstream.retries 0), the client gets
// the 502 envelope instead of an empty 200.
func TestFailureAfterTheHeadWithoutRetryIsAnEnvelope(t *testing.T) {
	for _, sh := range hhShapes {
		t.Run(sh.name, func(t *testing.T) {
			bad := hhFails(t, sh.head, sh.pause, sh.rst)
			tp := startProxy(t, testConfig(bad.url()))
			r := rawDo(t, tp.addr, hhReq)
			if r.status != 502 || !strings.Contains(r.body, `"code":502`) {
				t.Fatalf("got %d %q, want the 502 envelope", r.status, r.body)
			}
			// The failed request's token work was taken back.
			b := tp.Proxy.Pool().Backends()[0]
			if pre, dec, _ := b.state.Work(); pre != 0 || dec != 0 {
				t.Fatalf("pending prefill %v, decode %v after the failed request", pre, dec)
			}
		})
	}
}

// A head, then silence: the client gets the 504 envelope once
// upstream.idle_timeout passes, and the request, which waited past
// first_byte_timeout, is not sent again. A head, silence past
// first_byte_timeout, then a close: 502, not resent either.
//
// Neither waits on a wall-clock guess of how fast the proxy runs: the
// silent backend stays silent until the proxy closes the connection, and
// the closing one closes first_byte_timeout+300 ms after it read the
// request (so the proxy, whose wait began before, is always late) under
// an idle_timeout it cannot reach. The healthy pod is there only as a
// retry target: its own answers are not judged (a starved -race process
// could take longer than first_byte_timeout to read them; s7 and s9 saw
// "request 1: 504" here).
func TestHeadThenStallIsNotRetried(t *testing.T) {
	t.Run("silent", func(t *testing.T) {
		bad := startRawBackend(t, func(c net.Conn, _ int, _ []byte) bool {
			if _, err := io.WriteString(c, hhSSEHead); err != nil {
				return false
			}
			_ = c.SetReadDeadline(time.Time{})
			_, _ = io.Copy(io.Discard, c) // until the proxy closes
			return false
		})
		cfg := testConfig(bad.url())
		cfg.Upstream.FirstByteTimeout = config.Duration(300 * time.Millisecond)
		cfg.Upstream.IdleTimeout = config.Duration(600 * time.Millisecond)
		tp := startProxy(t, cfg)
		start := time.Now()
		r := rawDo(t, tp.addr, hhReq)
		d := time.Since(start)
		if r.status != 504 || !strings.Contains(r.body, `"code":504`) {
			t.Fatalf("after %v: got %d %q, want the 504 envelope", d, r.status, r.body)
		}
		if d < cfg.Upstream.IdleTimeout.D() {
			t.Errorf("504 after %v, before idle_timeout (600ms)", d)
		}
		if n := len(bad.requests()); n != 1 {
			t.Errorf("the silent backend got %d requests, want 1", n)
		}
	})
	t.Run("close_after_first_byte_timeout", func(t *testing.T) {
		const fbt = time.Second
		bad := hhFails(t, hhSSEHead, fbt+300*time.Millisecond, false)
		good := hhHealthy(t)
		cfg := testConfig(bad.url(), good.url())
		cfg.Route.Policy = "round_robin"
		cfg.Upstream.FirstByteTimeout = config.Duration(fbt)
		cfg.Upstream.IdleTimeout = config.Duration(time.Minute)
		tp := startProxy(t, cfg)
		for i := 0; len(bad.requests()) < 2; i++ {
			if i == 8 {
				t.Fatalf("the failing backend got %d of 8 requests under round_robin", len(bad.requests()))
			}
			before := len(bad.requests())
			r := rawDo(t, tp.addr, hhReq)
			if len(bad.requests()) == before {
				t.Logf("request %d (the healthy pod's turn): %d", i, r.status)
				continue
			}
			if r.status != 502 || !strings.Contains(r.body, `"code":502`) {
				t.Fatalf("request %d to the failing backend: %d %q, want the 502 envelope", i, r.status, r.body)
			}
		}
		if got := rtRetries(t, tp, ""); got != 0 {
			t.Fatalf("retries_total = %v, want 0: the attempts had waited past first_byte_timeout", got)
		}
	})
}

// Past maxHeldHeads, a stream's head goes out at once (as before the
// hold), so that streams waiting for their first token cannot hold a
// handler each without bound; under it, the head waits for the first
// frame. Every hold is given back.
func TestHeldHeadsAreBounded(t *testing.T) {
	up := startRawBackend(t, func(c net.Conn, _ int, _ []byte) bool {
		if _, err := io.WriteString(c, hhSSEHead); err != nil {
			return false
		}
		time.Sleep(400 * time.Millisecond)
		_, err := io.WriteString(c, "a\r\ndata: ok\n\n\r\n0\r\n\r\n")
		return err == nil
	})
	tp := startProxy(t, testConfig(up.url()))
	// headAt reports whether the status line arrived within 200 ms, before
	// the first frame, and reads the stream to its end.
	headAt := func() bool {
		c, err := net.Dial("tcp", tp.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, hhReq); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		buf := make([]byte, 4096)
		n, _ := c.Read(buf)
		early := n > 0
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		got := string(buf[:n])
		for !strings.Contains(got, "0\r\n\r\n") {
			k, err := c.Read(buf)
			if err != nil {
				t.Fatalf("stream: %v after %q", err, got)
			}
			got += string(buf[:k])
		}
		if !strings.HasPrefix(got, "HTTP/1.1 200") || !strings.Contains(got, "data: ok") {
			t.Fatalf("answer %q", got)
		}
		return early
	}
	if headAt() {
		t.Error("the head arrived before the first frame with holds to spare")
	}
	tp.Proxy.holds.max.Store(-1)
	if !headAt() {
		t.Error("the head waited for the first frame with no hold left")
	}
	if n := tp.Proxy.holds.n.Load(); n != 0 {
		t.Errorf("%d holds not given back", n)
	}
}
