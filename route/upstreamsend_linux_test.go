//go:build linux

package route

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// threadReads returns how many read system calls this thread has made
// (syscr in /proc/thread-self/io: every read(2), whatever it returned).
// The caller must hold its OS thread (runtime.LockOSThread).
func threadReads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/thread-self/io")
	if err != nil {
		t.Skipf("no per-thread I/O counters: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "syscr: "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no syscr in /proc/thread-self/io")
	return 0
}

// slowEcho answers every message it reads on c with "ok:" and the
// message, after delay: an answer that is never there when the proxy
// starts reading.
func slowEcho(c net.Conn, delay time.Duration) {
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return
		}
		time.Sleep(delay)
		if _, err := c.Write(append([]byte("ok:"), buf[:n]...)); err != nil {
			return
		}
	}
}

// TestHeldRequestReadsOnlyItsAnswer: a request written in one write is
// sent from the first read, which waits before it reads. On a fresh
// connection an exchange makes one read(2), the one that returns the
// answer; on a reused one two, the check that the socket is clean (which
// replaces the peek) and the answer. Written and read the plain way (the
// write, then a read that finds nothing and waits, then the read of the
// answer), the fresh connection's exchange makes two.
func TestHeldRequestReadsOnlyItsAnswer(t *testing.T) {
	c, s := tcpPair(t)
	go slowEcho(s, 5*time.Millisecond)
	g := newGuardedConn(c, func() (net.Conn, error) { return nil, errors.New("no redial expected") })
	_ = g.SetReadDeadline(time.Now().Add(5 * time.Second))

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	overhead := -threadReads(t) + threadReads(t) // the counter's own reads
	buf := make([]byte, 64)
	for i := range 5 {
		msg := []byte("req" + strconv.Itoa(i))
		before := threadReads(t)
		if n, err := g.Write(msg); n != len(msg) || err != nil {
			t.Fatalf("write %d: %d %v", i, n, err)
		}
		n, err := g.Read(buf)
		reads := threadReads(t) - before - overhead
		if err != nil || string(buf[:n]) != "ok:"+string(msg) {
			t.Fatalf("exchange %d: %q %v", i, buf[:n], err)
		}
		want := 2
		if i == 0 {
			want = 1
		}
		if reads != want {
			t.Errorf("exchange %d (reused: %t) made %d reads, want %d", i, i > 0, reads, want)
		}
	}
}

// lengthEcho answers each request on c with "ok:" and the request, once
// it has read the whole request, whose length comes from sizes: however
// TCP splits or joins the writes, one request gets one answer.
func lengthEcho(c net.Conn, sizes <-chan int) {
	for n := range sizes {
		buf := make([]byte, n)
		if _, err := io.ReadFull(c, buf); err != nil {
			return
		}
		if _, err := c.Write(append([]byte("ok:"), buf...)); err != nil {
			return
		}
	}
}

// TestHeldRequestLongerThanOneWrite: a request that arrives in several
// writes goes out whole and in order, after the check, and so does one
// too large to hold.
func TestHeldRequestLongerThanOneWrite(t *testing.T) {
	c, s := tcpPair(t)
	sizes := make(chan int, 1)
	defer close(sizes)
	go lengthEcho(s, sizes)
	g := newGuardedConn(c, func() (net.Conn, error) { return nil, errors.New("no redial expected") })
	_ = g.SetReadDeadline(time.Now().Add(5 * time.Second))
	big := bytes.Repeat([]byte("b"), maxHeldRequest+1)
	for _, parts := range [][]string{{"one"}, {"a1", "b2", "c3"}, {string(big)}, {"x", string(big), "y"}} {
		want := "ok:" + strings.Join(parts, "")
		sizes <- len(want) - len("ok:")
		for _, p := range parts {
			if n, err := g.Write([]byte(p)); n != len(p) || err != nil {
				t.Fatalf("write: %d %v", n, err)
			}
		}
		got := make([]byte, 0, len(want))
		buf := make([]byte, 64<<10)
		for len(got) < len(want) {
			n, err := g.Read(buf)
			if err != nil {
				t.Fatalf("read after %q: %v", got, err)
			}
			got = append(got, buf[:n]...)
		}
		if string(got) != want {
			t.Fatalf("got %d bytes %.20q..., want %d", len(got), got, len(want))
		}
	}
}

// acceptor returns a dial function for ln that hands each accepted
// server side to serve.
func acceptor(t *testing.T, ln net.Listener, serve func(int, net.Conn)) func() (net.Conn, error) {
	t.Helper()
	go func() {
		for i := 0; ; i++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			go serve(i, c)
		}
	}()
	return func() (net.Conn, error) { return net.Dial("tcp", ln.Addr().String()) }
}

// TestHeldRequestRedialKeepsDeadline: when the check finds stray bytes,
// the held request goes out on a fresh socket, which gets the read
// deadline the old one had: a backend that never answers there is cut at
// it, as it would be on the old socket.
func TestHeldRequestRedialKeepsDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dial := acceptor(t, ln, func(i int, c net.Conn) {
		if i > 0 {
			_, _ = io.Copy(io.Discard, c) // the fresh socket: silent
			return
		}
		buf := make([]byte, 64)
		if _, err := c.Read(buf); err != nil {
			return
		}
		_, _ = c.Write([]byte("answer"))
		time.Sleep(10 * time.Millisecond)
		_, _ = c.Write([]byte("stray"))
	})
	c, err := dial()
	if err != nil {
		t.Fatal(err)
	}
	g := newGuardedConn(c, dial)
	defer g.Close()
	_ = g.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 6)
	if _, err := g.Write([]byte("first")); err != nil {
		t.Fatal(err)
	}
	if n, err := io.ReadFull(g, buf); err != nil || string(buf[:n]) != "answer" {
		t.Fatalf("first answer %q %v", buf[:n], err)
	}
	time.Sleep(50 * time.Millisecond) // the stray bytes are in
	first := g.LocalAddr()
	_ = g.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := g.Write([]byte("second")); err != nil {
		t.Fatal(err)
	}
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() { n, err := g.Read(buf); done <- result{n, err} }()
	var r result
	select {
	case r = <-done:
	case <-time.After(3 * time.Second):
		g.Close()
		<-done
		t.Fatal("no deadline cut the read: the fresh socket did not get the old one's")
	}
	if g.LocalAddr() == first {
		t.Fatal("the socket with stray bytes carried another request")
	}
	if !isTimeout(r.err) || r.n != 0 {
		t.Fatalf("read on the silent fresh socket: %d %v, want a timeout", r.n, r.err)
	}
	if g.sendErr != nil {
		t.Fatalf("sendErr %v: the request was sent", g.sendErr)
	}
}

// TestHeldRequestSendFailures: a held request that cannot be sent says
// why in sendErr, as the error the proxy classifies (a write error: a
// request that never left; a failed redial: a dial error), and Read
// returns it.
func TestHeldRequestSendFailures(t *testing.T) {
	t.Run("write", func(t *testing.T) {
		c, s := tcpPair(t)
		g := newGuardedConn(c, func() (net.Conn, error) { return nil, errors.New("no redial expected") })
		g.used = true // as after an answer
		s.(*net.TCPConn).SetLinger(0)
		s.Close() // RST
		time.Sleep(20 * time.Millisecond)
		if _, err := g.Write([]byte("req")); err != nil {
			t.Fatal(err)
		}
		_, err := g.Read(make([]byte, 16))
		if err == nil || g.sendErr == nil || classify(g.sendErr) != failWrite {
			t.Fatalf("read %v, sendErr %v (kind %v), want a write failure", err, g.sendErr, classify(g.sendErr))
		}
	})
	t.Run("redial", func(t *testing.T) {
		c, s := tcpPair(t)
		g := newGuardedConn(c, func() (net.Conn, error) { return nil, errors.New("refused") })
		g.used = true
		s.Close() // FIN: not to be reused
		time.Sleep(20 * time.Millisecond)
		if _, err := g.Write([]byte("req")); err != nil {
			t.Fatal(err)
		}
		_, err := g.Read(make([]byte, 16))
		if err == nil || g.sendErr == nil || classify(g.sendErr) != failConnect {
			t.Fatalf("read %v, sendErr %v (kind %v), want a dial failure", err, g.sendErr, classify(g.sendErr))
		}
	})
}

// A request held back on a pooled connection the pod reset (it restarted)
// fails in its write, inside the first read: fasthttp calls that a
// connection closed before the first byte, but the request never left, so
// it is re-picked even with upstream.retry_on_reset off (which would
// answer a reset after the write with 502), and the restarted pod's
// breaker stays closed.
func TestHeldRequestWriteFailureIsNotSent(t *testing.T) {
	fleet := ftFleet(t, 1)
	pod := fleet.Servers()[0]
	cfg := withDefaultAllow(testConfig(pod.URL()))
	cfg.Upstream.RetryOnReset = false
	tp := startProxy(t, cfg)
	rtWarm(t, tp)
	if err := pod.Close(); err != nil { // RST: the pooled sockets fail the write
		t.Fatal(err)
	}
	if err := pod.Restart(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if err := rtDo(tp, false, 2); err != nil {
			t.Fatalf("request %d after the restart: %v", i, err)
		}
	}
	if got := rtRetries(t, tp, "reset"); got < 1 {
		t.Fatalf("retries_total{reason=reset} = %v: no stale connection was met", got)
	}
	if st := ftBackend(tp, pod.Addr()).Breaker; st != "closed" {
		t.Fatalf("breaker %q after a restart", st)
	}
}
