package route

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// A small JSON answer is read whole and reaches the client intact, on one
// upstream connection reused for every request (the body was read to its
// end); one cut short before its Content-Length gets the 502 envelope, not
// a truncated body, and counts against the backend.
func TestSmallBodiesAreBufferedWhole(t *testing.T) {
	body := `{"id":"cmpl-1","choices":[{"text":"` + strings.Repeat("x", 2000) + `"}]}`
	be := startRawBackend(t, func(c net.Conn, n int, head []byte) bool {
		if strings.Contains(string(head), "cut-short") {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 4000\r\n\r\n"+body[:100])
			return false
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "+itoa(len(body))+"\r\n\r\n"+body)
		return true
	})
	cfg := testConfig(be.url())
	cfg.Route.Policy = "least_inflight"
	tp := startProxy(t, cfg)
	for range 5 {
		resp := post(t, tp.url("/v1/completions"), `{"model":"m"}`)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != body {
			t.Fatalf("status %d, %d bytes; want 200 and the %d-byte body", resp.StatusCode, len(b), len(body))
		}
	}
	if n := len(be.conns); n != 1 {
		t.Errorf("%d upstream connections for 5 sequential requests, want 1 (reused)", n)
	}
	resp := post(t, tp.url("/v1/completions?cut-short"), `{"model":"m"}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 502 || !strings.Contains(string(b), `"code":502`) {
		t.Fatalf("cut-short body: status %d, %q; want the 502 envelope", resp.StatusCode, b)
	}
	if got := tp.counter(t, "probegate_requests_total", map[string]string{"code": "200"}); got != 5 {
		t.Errorf("requests_total{code=200} = %v, want 5", got)
	}
}

// TestLazyDeadline: a deadline is re-armed only when the armed one is
// shorter than asked or longer than asked plus d/16.
func TestLazyDeadline(t *testing.T) {
	const d = 1600 * time.Millisecond // slack 100ms
	t0 := time.Unix(1_800_000_000, 0)
	var l lazyDeadline
	at, ok := l.due(t0, d)
	if !ok || !at.Equal(t0.Add(1700*time.Millisecond)) {
		t.Fatalf("first: %v %v, want arm at +1.7s", at, ok)
	}
	l.armed(nil, at)
	for _, tc := range []struct {
		name string
		now  time.Time
		d    time.Duration
		want bool
	}{
		{"same instant", t0, d, false},
		{"within the slack", t0.Add(100 * time.Millisecond), d, false},
		{"past the slack: the wait would get less than d", t0.Add(101 * time.Millisecond), d, true},
		{"a much shorter wait (first byte) is cut to it", t0, d / 2, true},
	} {
		if _, got := l.due(tc.now, tc.d); got != tc.want {
			t.Errorf("%s: due = %v, want %v", tc.name, got, tc.want)
		}
	}
	l.armed(io.ErrClosedPipe, at)
	if _, ok := l.due(t0, d); !ok {
		t.Error("after a failed arm, due must ask again")
	}
}

// An upstream header block over upstreamReadBuffer gets the 502 envelope
// (nginx's "upstream sent too big header"), and the proxy goes on serving.
func TestOversizedUpstreamHeadersAre502(t *testing.T) {
	be := startRawBackend(t, func(c net.Conn, n int, head []byte) bool {
		if strings.Contains(string(head), "big-header") {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Big: "+strings.Repeat("b", upstreamReadBuffer)+"\r\nContent-Length: 2\r\n\r\n{}")
			return false
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
		return true
	})
	cfg := testConfig(be.url())
	cfg.Route.Policy = "least_inflight"
	tp := startProxy(t, cfg)
	resp := post(t, tp.url("/v1/completions?big-header"), `{"model":"m"}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 502 || !strings.Contains(string(b), `"code":502`) {
		t.Fatalf("status %d, %q; want the 502 envelope", resp.StatusCode, b)
	}
	resp = post(t, tp.url("/v1/completions"), `{"model":"m"}`)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("next request: status %d", resp.StatusCode)
	}
}
