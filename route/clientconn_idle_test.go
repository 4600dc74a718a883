package route

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// idleReq is a small keep-alive request.
const idleReq = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"

// idleUpstream answers every request with a small JSON body.
func idleUpstream(t *testing.T) string {
	t.Helper()
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	})
	return up.URL
}

// readOK reads one response from br and fails unless it is a 200 with
// the upstream's body.
func readOK(t *testing.T, c net.Conn, br *bufio.Reader, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || string(b) != `{"ok":true}` {
		t.Fatalf("%s: %d %q %v", what, resp.StatusCode, b, err)
	}
}

// testRelease is the idle release of these tests' proxies, and idleWait
// long enough for an idle connection to be released (the release, armed
// with a quarter of it as slack), with a margin.
const (
	testRelease = 300 * time.Millisecond
	idleWait    = 3 * testRelease
)

// startReleasing is startProxy over the upstream at upURL, with idle
// connections released after release instead of clientIdleRelease.
func startReleasing(t *testing.T, upURL string, release time.Duration) *testProxy {
	t.Helper()
	reg := prometheus.NewRegistry()
	p, err := New(Options{Config: testConfig(upURL), Registerer: reg})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	p.idleRelease = release // before Serve: its connections read it
	return serveProxy(t, p, reg, nil)
}

// waitReleased waits up to 10 s for n connections to be released.
func waitReleased(t *testing.T, p *Proxy, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for parkedIdle(p) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections released, want %d", parkedIdle(p), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// parkedIdle counts the connections released while idle (readIdle) and
// waiting for their next request.
func parkedIdle(p *Proxy) int {
	n := 0
	p.hijacks.each(func(e *hijackEntry) {
		if e.s == nil && e.phase.Load() == hijackParked {
			n++
		}
	})
	return n
}

// heapInUse is the process's heap in use after a collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// A keep-alive client connection idle for clientIdleRelease gives back
// the buffers fasthttp holds for it (its 64 KiB read buffer above all):
// fasthttp serves none of 200 idle connections any more, and they hold a
// few KiB of heap each, where they held tens of KiB while waiting under
// fasthttp. Without the release (clientConn.readIdle) fasthttp holds all
// 200, at ~70 KiB each, for the whole idle timeout. The heap is measured in
// a process of its own (this test binary, running this test alone): other
// tests' garbage would swamp it.
func TestIdleClientConnectionsGiveBackTheirBuffers(t *testing.T) {
	if os.Getenv(idleHeapChild) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestIdleClientConnectionsGiveBackTheirBuffers$", "-test.v")
		cmd.Env = append(os.Environ(), idleHeapChild+"=1")
		out, err := cmd.CombinedOutput()
		t.Logf("in a process of its own:\n%s", out)
		if err != nil {
			t.Fatalf("%v", err)
		}
		return
	}
	// A release long enough that every connection is still held when the
	// last one was answered, on a slow machine too.
	tp := startReleasing(t, idleUpstream(t), 3*time.Second)
	before := heapInUse()
	const n = 200
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := net.Dial("tcp", tp.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, idleReq)
		readOK(t, c, bufio.NewReaderSize(c, 512), "request")
		conns[i] = c
	}
	held, served := heapInUse(), tp.server.GetOpenConnectionsCount()
	waitReleased(t, tp.Proxy, n)
	released, left := heapInUse(), tp.server.GetOpenConnectionsCount()
	perConn := func(h uint64) float64 { return (float64(h) - float64(before)) / n / 1024 }
	t.Logf("heap in use per idle connection: %.1f KiB waiting under fasthttp (%d served), %.1f KiB released (%d served)", perConn(held), served, perConn(released), left)
	if left != 0 {
		t.Errorf("fasthttp still serves %d idle connections, want 0", left)
	}
	if served == n && perConn(held) < 32 {
		t.Fatalf("connections waiting under fasthttp hold %.1f KiB each: the measure cannot tell a release", perConn(held))
	}
	if perConn(released) > 8 {
		t.Fatalf("released idle connections hold %.1f KiB each, want at most 8", perConn(released))
	}
	// Every one of them still serves its next request.
	for _, c := range conns {
		io.WriteString(c, idleReq)
		readOK(t, c, bufio.NewReaderSize(c, 512), "request after the release")
	}
}

// servedOnce dials the proxy at addr and has one request answered on the
// connection, which then waits for its next request; it is closed at the
// test's end.
func servedOnce(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	br := bufio.NewReader(c)
	io.WriteString(c, idleReq)
	readOK(t, c, br, "first request")
	return c, br
}

// idleHeapChild marks the process TestIdleClientConnectionsGiveBackTheirBuffers
// starts to measure the heap in.
const idleHeapChild = "PROBEGATE_TEST_IDLE_HEAP_CHILD"

// A released connection is the same keep-alive connection to its client:
// the next request, a pipelined pair, and another release after it are
// answered on the same socket.
func TestReleasedIdleConnectionServesItsNextRequests(t *testing.T) {
	tp := startReleasing(t, idleUpstream(t), testRelease)
	c, br := servedOnce(t, tp.addr)
	for range 2 {
		waitReleased(t, tp.Proxy, 1)
		io.WriteString(c, idleReq+idleReq) // pipelined
		readOK(t, c, br, "pipelined request 1")
		readOK(t, c, br, "pipelined request 2")
	}
}

// Only the wait for a next request is released. A request whose body, or
// a pipelined request whose rest, comes after a silence longer than the
// release (and within server.read_timeout) is read as before:
// the connection is not handed away in the middle of a request.
func TestSilenceInsideARequestIsNotAnIdleWait(t *testing.T) {
	tp := startReleasing(t, idleUpstream(t), testRelease)
	c, br := servedOnce(t, tp.addr)
	// The next request's head now, its body after the silence.
	head, body := idleReq[:len(idleReq)-2], idleReq[len(idleReq)-2:]
	io.WriteString(c, head)
	time.Sleep(idleWait)
	io.WriteString(c, body)
	readOK(t, c, br, "request with a late body")
	// A request with half of a pipelined one behind it, the rest later.
	half := len(idleReq) / 2
	io.WriteString(c, idleReq+idleReq[:half])
	readOK(t, c, br, "request before the pipelined half")
	time.Sleep(idleWait)
	io.WriteString(c, idleReq[half:])
	readOK(t, c, br, "pipelined request completed late")
}

// Shutdown closes a released idle connection at once, as fasthttp closes
// the idle connections it holds, and its waiting goroutine ends.
func TestShutdownClosesReleasedIdleConnections(t *testing.T) {
	upURL := idleUpstream(t)
	defer noGoroutineLeft(t)()
	tp := startReleasing(t, upURL, testRelease)
	c, br := servedOnce(t, tp.addr)
	waitReleased(t, tp.Proxy, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	b, err := io.ReadAll(br)
	if err != nil || len(b) != 0 {
		t.Fatalf("released connection after Shutdown: read %q, %v; want a close", b, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Shutdown and the close took %v", d)
	}
}

// A connection given back to the server after a hijacked SSE stream
// (afterStream) is released while idle as any other: after the stream
// and a request served behind it, it leaves fasthttp once idle for the
// release time, and still serves its next request (a stream and then a
// plain one) on the same socket. Before, afterStream's clientConn was
// never given the proxy (clientConn.p nil), so fasthttp held its buffers
// for the whole idle timeout. Shutdown then leaves no goroutine behind.
func TestConnectionAfterAStreamIsReleasedWhenIdle(t *testing.T) {
	up := upstream(t, sseOrJSON(2, 5*time.Millisecond))
	defer noGoroutineLeft(t)()
	tp := startReleasing(t, up.URL, testRelease)
	c, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	stream, plain := `{"stream":true}`, `{}`
	send := func(body string) {
		fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	}
	for round := range 2 {
		send(stream)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if resp, got := readResponse(t, br); resp.StatusCode != 200 || resp.Close || !strings.HasSuffix(got, "data: [DONE]\n\n") {
			t.Fatalf("round %d: stream: status %d, close %v, body %q", round, resp.StatusCode, resp.Close, got)
		}
		send(plain)
		readOK(t, c, br, "request after the stream")
		waitReleased(t, tp.Proxy, 1)
		if n := tp.server.GetOpenConnectionsCount(); n != 0 {
			t.Fatalf("round %d: fasthttp still serves %d connections after the release, want 0", round, n)
		}
	}
	send(plain)
	readOK(t, c, br, "request after the release")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}
