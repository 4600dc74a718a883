package bench

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// startRawUpstream serves a rawUpstream on loopback for the test.
func startRawUpstream(t *testing.T) *rawUpstream {
	t.Helper()
	u, err := newRawUpstream("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- u.Serve() }()
	t.Cleanup(func() {
		u.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return u
}

// TestRawUpstreamAnswers: the raw upstream answers what the overhead
// scenario's targets send: keep-alive POSTs (also with the body in a later
// write, and pipelined, answered in order), GET /metrics for probes, a
// lower-case content-length, and an unframed POST with a 400 and a close.
func TestRawUpstreamAnswers(t *testing.T) {
	u := startRawUpstream(t)
	c, err := net.Dial("tcp", u.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(c)
	read := func() (string, string) {
		t.Helper()
		status, _ := r.ReadString('\n')
		n := -1
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("reading head: %v", err)
			}
			if l == "\r\n" {
				break
			}
			if k, v, ok := strings.Cut(l, ":"); ok && strings.EqualFold(k, "Content-Length") {
				if n, err = strconv.Atoi(strings.TrimSpace(v)); err != nil {
					t.Fatalf("Content-Length %q", v)
				}
			}
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			t.Fatalf("reading body: %v", err)
		}
		return strings.TrimSpace(status), string(b)
	}
	post := "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(overheadBody)) + "\r\n\r\n"
	metrics := "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"

	// The head, then the body in a second write.
	_, _ = c.Write([]byte(post))
	time.Sleep(20 * time.Millisecond)
	_, _ = c.Write([]byte(overheadBody))
	if s, b := read(); s != "HTTP/1.1 200 OK" || b != string(fastBody) {
		t.Fatalf("POST: %q %q", s, b)
	}
	// Three pipelined requests in one write, answered in order.
	lower := strings.Replace(post, "Content-Length", "content-length", 1)
	_, _ = c.Write([]byte(metrics + lower + overheadBody + metrics))
	for i, want := range []string{string(fastMetrics), string(fastBody), string(fastMetrics)} {
		if s, b := read(); s != "HTTP/1.1 200 OK" || b != want {
			t.Fatalf("pipelined %d: %q %q", i, s, b)
		}
	}
	// An unframed POST: 400, then the connection closes.
	_, _ = c.Write([]byte("POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"))
	if s, _ := read(); s != "HTTP/1.1 400 Bad Request" {
		t.Fatalf("unframed: %q", s)
	}
	if _, err := r.ReadByte(); err != io.EOF {
		t.Fatalf("after the 400: %v, want EOF", err)
	}
}

// TestRawUpstreamOneThread: the raw upstream serves many connections at
// once from its one loop: 32 open connections, each answered, add no
// goroutine (the fasthttp upstream runs one per connection: 32 more),
// which is the per-request scheduling it exists to save.
func TestRawUpstreamOneThread(t *testing.T) {
	u := startRawUpstream(t)
	time.Sleep(10 * time.Millisecond)
	before := runtime.NumGoroutine()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	req := []byte("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + strconv.Itoa(len(overheadBody)) + "\r\n\r\n" + overheadBody)
	for range 32 {
		c, err := net.Dial("tcp", u.Addr())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(req); err != nil {
			t.Fatal(err)
		}
	}
	want := len(rawHeadJSON) + len(fastBody)
	for i, c := range conns {
		b := make([]byte, want)
		if _, err := io.ReadFull(c, b); err != nil || !strings.HasSuffix(string(b), string(fastBody)) {
			t.Fatalf("conn %d: %v %q", i, err, b)
		}
	}
	if n := runtime.NumGoroutine() - before; n > 0 {
		t.Errorf("%d more goroutines with 32 connections open, want none", n)
	}
}

// TestRawUpstreamLetsTheWorldStop: the loop's idle wait must let the
// runtime stop the world; with one P, five GCs (each stops every
// goroutine) end promptly while the upstream idles. A wait that bypasses
// Go's scheduler never reaches a preemption point and stalls the world, and
// with it the whole bench process, for as long as the upstream runs (CI saw
// 88 s). A stalled world cannot run a watchdog, so the check runs in a
// child process that the parent kills after 20 s.
func TestRawUpstreamLetsTheWorldStop(t *testing.T) {
	if os.Getenv("PROBEGATE_RAW_STW_CHILD") == "1" {
		runtime.GOMAXPROCS(1)
		startRawUpstream(t)
		time.Sleep(10 * time.Millisecond) // the loop is now waiting
		for range 5 {
			runtime.GC()
		}
		return
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestRawUpstreamLetsTheWorldStop$", "-test.count=1")
	cmd.Env = append(os.Environ(), "PROBEGATE_RAW_STW_CHILD=1")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("5 GCs with the raw upstream idle on one P did not end in %v: the loop stalls the world", time.Since(start).Round(time.Second))
	}
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}
