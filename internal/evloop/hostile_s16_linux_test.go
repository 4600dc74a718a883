//go:build linux

package evloop

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// Hostile clients and upstreams against the loop, over real sockets
// (session 16's red team; route's equivalents are route/hostile_*_test.go).

// A client's Connection header cannot take the body's length off the
// request that goes upstream: "Connection: Content-Length" made the loop
// drop the field (a header the Connection field names is hop-by-hop) while
// it still sent the body, so the upstream read a POST without a body and
// the body as a second request of the client's choosing, on a pooled
// connection, never judged by the Handler (route.allow_paths once wired:
// /sleep, /v1/load_lora_adapter, ...). Now the upstream gets one request
// with its body; the smuggled one never arrives.
func TestConnectionCannotStripTheBodyLength(t *testing.T) {
	smuggled := "POST /sleep?level=2 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
	for _, conn := range []string{"Content-Length", "keep-alive, content-length", "CONTENT-LENGTH, x-a"} {
		t.Run(conn, func(t *testing.T) {
			up := startUpstream(t, nil)
			h := newHandler(up.addr())
			s := startLoop(t, h, newFakeClock(), nil)
			c := dial(t, s)
			c.send(post("/v1/completions", smuggled, "Connection: "+conn+"\r\n"))
			status, _, body := c.response()
			if status != 200 || string(body) != "ok:/v1/completions" {
				t.Fatalf("answer %d %q", status, body)
			}
			if r := up.next(t); r.path != "/v1/completions" || r.body != smuggled {
				t.Fatalf("upstream got %s %s with body %q, want the client's body", r.method, r.path, r.body)
			}
			// A smuggled request would be read right after the first.
			time.Sleep(100 * time.Millisecond)
			up.none(t)
		})
	}
}

// A head that declares a large body costs the loop memory for the body
// bytes that arrive, not for the length it declares: 16 connections each
// sending only a head with Content-Length 8 MiB (the limit) made the loop
// allocate 8 MiB per connection at once (128 MiB for 1.6 KB sent), held
// until ReadTimeout. Measured as the process's allocations while the loop
// read the heads (runtime.MemStats.TotalAlloc), the 408s at ReadTimeout
// proving every head was read.
func TestDeclaredBodyLengthAllocatesNothingUpFront(t *testing.T) {
	const conns, declared = 16, 8 << 20
	clk := newFakeClock()
	s := startLoop(t, newHandler(netip.AddrPort{}), clk, func(c *Config) { c.MaxBodyBytes = declared })
	cs := make([]*client, conns)
	for i := range cs {
		cs[i] = dial(t, s)
	}
	before := totalAlloc()
	for _, c := range cs {
		c.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + strconv.Itoa(declared) + "\r\n\r\n{")
	}
	time.Sleep(200 * time.Millisecond) // the loop reads the heads
	clk.advance(6 * time.Second)       // ReadTimeout is 5 s
	for _, c := range cs {
		if status, _, _ := c.response(); status != 408 {
			t.Fatalf("status %d, want 408", status)
		}
	}
	grew := totalAlloc() - before
	t.Logf("%d heads declaring %d MiB each: %d KiB allocated", conns, declared>>20, grew>>10)
	if grew > conns*declared/8 {
		t.Fatalf("%d connections that sent a head each: %d MiB allocated", conns, grew>>20)
	}
}

func totalAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// Control bytes in an upstream's response head are a bad response (502,
// ErrBadResponse), wherever they are: the loop relays the status line and
// header lines as the upstream wrote them, so a bare CR, NUL or other
// control byte it let through reaches the client, whose parser may split
// the line there (a bare CR ending a line makes the next bytes a header,
// or ends the head early). parseResponse checked values only after
// bytes.TrimSpace (which trims \v, \f and \r too) and never checked the
// status line past the code; route refuses all of these (502).
func TestUpstreamHeadControlBytesAreBadResponses(t *testing.T) {
	for name, head := range map[string]string{
		"bare CR ending a value":   "HTTP/1.1 200 OK\r\nX-A: a\r\r\nContent-Length: 2\r\n\r\nok",
		"bare CR in the reason":    "HTTP/1.1 200 O\rContent-Length: 0\r\nContent-Length: 2\r\n\r\nok",
		"NUL in the reason":        "HTTP/1.1 200 O\x00K\r\nContent-Length: 2\r\n\r\nok",
		"VT before a length":       "HTTP/1.1 200 OK\r\nContent-Length: \x0b2\r\n\r\nok",
		"FF after a value":         "HTTP/1.1 200 OK\r\nX-A: a\x0c\r\nContent-Length: 2\r\n\r\nok",
		"version not a digit":      "HTTP/1.x 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"DEL in the reason":        "HTTP/1.1 200 O\x7fK\r\nContent-Length: 2\r\n\r\nok",
		"bare CR leading a value":  "HTTP/1.1 200 OK\r\nX-A: \ra\r\nContent-Length: 2\r\n\r\nok",
		"escape in a header value": "HTTP/1.1 200 OK\r\nX-A: \x1b[2J\r\nContent-Length: 2\r\n\r\nok",
	} {
		t.Run(name, func(t *testing.T) {
			up := startUpstream(t, func(c net.Conn, _ int, _ upReq) bool {
				_, _ = io.WriteString(c, head)
				return false
			})
			h := newHandler(up.addr())
			s := startLoop(t, h, newFakeClock(), nil)
			c := dial(t, s)
			c.send(post("/a", "1"))
			status, _, body := c.response()
			if status != 502 {
				t.Fatalf("status %d (body %q), want 502", status, body)
			}
			checkEnvelope(t, 502, body)
			if res := h.result(t); !errors.Is(res.Err, ErrBadResponse) {
				t.Fatalf("outcome %+v", res)
			}
		})
	}
}
