//go:build linux

package evloop

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
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
		t.Run(name, func(t *testing.T) { wantBadResponse(t, head) })
	}
}

// wantBadResponse fails unless an upstream answering head (then closing)
// makes the loop answer 502 with the envelope, reported as ErrBadResponse
// and not retryable.
func wantBadResponse(t *testing.T, head string) {
	t.Helper()
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
	if res := h.result(t); !errors.Is(res.Err, ErrBadResponse) || res.Retryable {
		t.Fatalf("outcome %+v", res)
	}
}

// A client that never reads a large answer costs the loop a bounded
// amount of memory: the loop stops reading the upstream while maxPending
// bytes wait for the client (back-pressure), so a 32 MiB answer to a
// client that reads nothing for a second costs a few MiB at most, and all
// of it arrives once the client reads. Held (coverage): the loop did this
// before session 16.
func TestClientThatNeverReadsCostsBoundedMemory(t *testing.T) {
	const size = 32 << 20
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	up := startUpstream(t, func(c net.Conn, _ int, _ upReq) bool {
		if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: "+strconv.Itoa(size)+"\r\n\r\n"); err != nil {
			return false
		}
		for range size / len(chunk) {
			if _, err := c.Write(chunk); err != nil {
				return false
			}
		}
		return true
	})
	s := startLoop(t, newHandler(up.addr()), newFakeClock(), nil)
	c := dial(t, s)
	before := totalAlloc()
	c.send(post("/big", "1"))
	time.Sleep(time.Second)
	grew := totalAlloc() - before
	t.Logf("a 32 MiB answer, the client reading nothing for 1 s: %d KiB allocated", grew>>10)
	if grew > 8<<20 {
		t.Fatalf("%d MiB allocated while the client read nothing", grew>>20)
	}
	_ = c.c.SetDeadline(time.Now().Add(60 * time.Second))
	status, _, body := c.response()
	if status != 200 || len(body) != size {
		t.Fatalf("status %d, %d bytes of %d", status, len(body), size)
	}
}

// A pipelining flood from a client that does not read costs bounded
// memory and is served in order: 2,000 requests written in one burst,
// each answered with 16 KiB (32 MiB in all), the client reading nothing
// for a second. The loop starts a pipelined request only once the
// previous answer went out to the socket, and stops reading an answer
// while maxPending bytes wait for the client, so while the client does
// not read, answers wait in the upstream's and the kernel's buffers, not
// in the loop's memory; then every answer arrives, in order. Held
// (coverage): 0.6-0.8 MiB allocated in the second; with both conditions
// removed (serveClient's and pumpUp's) the loop queues answers in memory
// (9.6 MiB) and the test fails; either alone still bounds it.
func TestPipelineFloodServedInOrder(t *testing.T) {
	const n, size = 2000, 16 << 10
	// The answers are made before the count starts: the upstream
	// allocates only for reading the requests.
	pad := strings.Repeat("x", size-16)
	answers := make([][]byte, n)
	for i := range answers {
		body := ("/p" + strconv.Itoa(i) + "                ")[:16] + pad
		answers[i] = []byte("HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	}
	up := startUpstream(t, func(c net.Conn, _ int, r upReq) bool {
		i, _ := strconv.Atoi(strings.TrimPrefix(r.path, "/p"))
		_, err := c.Write(answers[i])
		return err == nil
	})
	h := newHandler(up.addr())
	s := startLoop(t, h, newFakeClock(), nil)
	c := dial(t, s)
	_ = c.c.SetDeadline(time.Now().Add(60 * time.Second))
	var burst strings.Builder
	for i := range n {
		burst.WriteString(post("/p"+strconv.Itoa(i), "{}"))
	}
	before := totalAlloc()
	if _, err := io.WriteString(c.c, burst.String()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	grew := totalAlloc() - before
	t.Logf("%d pipelined requests, 16 KiB answers, the client reading nothing for 1 s: %d KiB allocated", n, grew>>10)
	if grew > 4<<20 {
		t.Fatalf("%d MiB allocated while the client read nothing", grew>>20)
	}
	for i := range n {
		status, _, body := c.response()
		if want := "/p" + strconv.Itoa(i); status != 200 || len(body) != size || strings.TrimSpace(string(body[:16])) != want {
			t.Fatalf("response %d: %d, %d bytes, %q, want %q", i, status, len(body), body[:min(16, len(body))], want)
		}
		up.next(t) // the upstream's and the handler's records hold 1,024
		h.result(t)
	}
}

// An upstream answer split at any byte (head and body, the split moving
// one byte per request on one kept-alive upstream connection) is relayed
// whole and the same, and the connection is reused. Held (coverage).
func TestUpstreamAnswerSplitAtEveryByte(t *testing.T) {
	const answer = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 11\r\n\r\nhello world"
	up := startUpstream(t, func(c net.Conn, _ int, r upReq) bool {
		k, _ := strconv.Atoi(strings.TrimPrefix(r.path, "/split/"))
		if _, err := io.WriteString(c, answer[:k]); err != nil {
			return false
		}
		time.Sleep(5 * time.Millisecond) // a read of its own
		_, err := io.WriteString(c, answer[k:])
		return err == nil
	})
	h := newHandler(up.addr())
	s := startLoop(t, h, newFakeClock(), nil)
	c := dial(t, s)
	for k := 1; k < len(answer); k++ {
		c.send(post("/split/"+strconv.Itoa(k), "{}"))
		status, _, body := c.response()
		if status != 200 || string(body) != "hello world" {
			t.Fatalf("split at %d: %d %q", k, status, body)
		}
		if res := h.result(t); res.Err != nil || res.Reused != (k > 1) {
			t.Fatalf("split at %d: outcome %+v", k, res)
		}
	}
}

// A body trickled a byte at a time does not extend the request's read
// deadline: ReadTimeout runs from the request's first byte, so a slowloris
// body gets its 408 however steadily it drips. Held (coverage).
func TestTrickledBodyGets408AtReadTimeout(t *testing.T) {
	clk := newFakeClock()
	up := startUpstream(t, nil)
	s := startLoop(t, newHandler(up.addr()), clk, nil)
	c := dial(t, s)
	c.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
	answered := make(chan int, 1)
	go func() { status, _, _ := c.response(); answered <- status }()
	for i := 0; ; i++ {
		select {
		case status := <-answered:
			if status != 408 {
				t.Fatalf("status %d, want 408", status)
			}
			if i < 5 || i > 8 { // ReadTimeout 5 s, a second per byte (accept jitter: one more)
				t.Fatalf("408 after %d one-second drips, want 5-8", i)
			}
			up.none(t)
			return
		case <-time.After(50 * time.Millisecond):
			if i < 50 {
				_, _ = c.c.Write([]byte("x"))
			}
			clk.advance(time.Second)
		}
	}
}
