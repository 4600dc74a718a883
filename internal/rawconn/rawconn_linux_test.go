//go:build linux

package rawconn

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// pair returns both ends of a loopback TCP connection, wrapped.
func pair(t testing.TB) (a, b *Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		acc <- c
	}()
	// Generous bounds here and below: a -race test process at idle
	// priority on a loaded machine waited over a second for a loopback
	// dial, and over 10 s to move 8 MiB (.ci/run in session 15 at load
	// 17: "dial tcp: i/o timeout", "exchange: ... i/o timeout").
	ca, err := DialTimeout(ln.Addr().String(), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cb := <-acc
	if cb == nil {
		t.Fatal("accept failed")
	}
	a, ok := ca.(*Conn)
	if !ok {
		t.Fatalf("DialTimeout returned %T, want *Conn", ca)
	}
	b, ok = Wrap(cb).(*Conn)
	if !ok {
		t.Fatal("Wrap of a TCP connection is not a *Conn")
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// TestConnLikeNet: a Conn gives what net.Conn's Read and Write give (the
// probe fetcher's error classification and fasthttp depend on it): bytes,
// a timeout named "read" at a deadline, io.EOF at the peer's close,
// net.ErrClosed after Close, a "write" error with the errno after a reset.
func TestConnLikeNet(t *testing.T) {
	a, b := pair(t)
	if n, err := a.Write([]byte("hello")); n != 5 || err != nil {
		t.Fatalf("Write: %d %v", n, err)
	}
	buf := make([]byte, 16)
	_ = b.SetReadDeadline(time.Now().Add(time.Second))
	if n, err := b.Read(buf); n != 5 || err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("Read: %d %v %q", n, err, buf[:n])
	}
	if n, err := b.Read(nil); n != 0 || err != nil {
		t.Fatalf("Read(nil): %d %v", n, err)
	}

	_ = b.SetDeadline(time.Now().Add(20 * time.Millisecond))
	_, err := b.Read(buf)
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "read" || !op.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past the deadline: %v (%#v)", err, op)
	}

	_ = b.SetDeadline(time.Time{})
	if _, err := a.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	a.Close()
	if n, err := b.Read(buf); n != 1 || err != nil {
		t.Fatalf("Read before EOF: %d %v", n, err)
	}
	if n, err := b.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("Read at the peer's close: %d %v, want io.EOF", n, err)
	}
	if _, err := a.Read(buf); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Read after Close: %v, want net.ErrClosed", err)
	}

	// Close while a read waits ends the read with net.ErrClosed.
	c, _ := pair(t)
	done := make(chan error, 1)
	go func() { _, err := c.Read(buf[:1]); done <- err }()
	time.Sleep(20 * time.Millisecond)
	c.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Read cut by Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not end a waiting raw read")
	}

	// Writing to a peer that closed: a "write" error with the errno
	// (EPIPE or ECONNRESET), once the reset has come back.
	var werr error
	for i := 0; i < 100 && werr == nil; i++ {
		_, werr = b.Write([]byte("after close"))
		time.Sleep(time.Millisecond)
	}
	if !errors.As(werr, &op) || op.Op != "write" || !(errors.Is(werr, syscall.EPIPE) || errors.Is(werr, syscall.ECONNRESET)) {
		t.Fatalf("Write to a closed peer: %v", werr)
	}
	if b.LocalAddr() == nil || b.RemoteAddr() == nil {
		t.Fatal("no addresses")
	}
}

// TestConnWriteWaits: a write larger than the socket buffers parks at
// EAGAIN and finishes, whole and in order, as the peer reads; a write
// deadline cuts it when the peer does not read.
func TestConnWriteWaits(t *testing.T) {
	a, b := pair(t)
	want := make([]byte, 8<<20)
	for i := range want {
		want[i] = byte(i * 7)
	}
	got := make(chan []byte, 1)
	go func() {
		var all []byte
		buf := make([]byte, 4096)
		_ = b.SetReadDeadline(time.Now().Add(60 * time.Second))
		for len(all) < len(want) {
			n, err := b.Read(buf)
			all = append(all, buf[:n]...)
			if err != nil {
				break
			}
		}
		got <- all
	}()
	if n, err := a.Write(want); n != len(want) || err != nil {
		t.Fatalf("Write: %d of %d, %v", n, len(want), err)
	}
	if g := <-got; !bytes.Equal(g, want) {
		t.Fatalf("the reader got %d bytes, not the %d written in order", len(g), len(want))
	}
	_ = a.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	n, err := a.Write(want)
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "write" || !op.Timeout() || n >= len(want) {
		t.Fatalf("Write past the deadline: %d %v", n, err)
	}
}

// TestConnAllocs: a write and a read allocate nothing.
func TestConnAllocs(t *testing.T) {
	a, b := pair(t)
	_ = b.SetReadDeadline(time.Now().Add(10 * time.Second))
	msg, buf := []byte("ping"), make([]byte, 16)
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := a.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Read(buf); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per write and read, want 0", allocs)
	}
}

// TestWrapKeepsOtherConns: what is not a TCP connection keeps its own
// Read and Write; a failed dial is an error, not a Conn.
func TestWrapKeepsOtherConns(t *testing.T) {
	p1, p2 := net.Pipe()
	defer p1.Close()
	defer p2.Close()
	if c := Wrap(p1); c != p1 {
		t.Fatalf("Wrap(pipe) = %T, want the pipe itself", c)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if c, err := DialTimeout(addr, time.Second); err == nil || c != nil {
		t.Fatalf("dial to a closed port: %v, %v", c, err)
	}
}

// TestExchangeLargeRequest: Exchange finishes a request the socket could
// not take at once (with a wait for writability) and then reads the
// answer.
func TestExchangeLargeRequest(t *testing.T) {
	a, cb := pair(t)
	req := bytes.Repeat([]byte("z"), 8<<20)
	go func() {
		got, err := io.ReadAll(io.LimitReader(cb, int64(len(req))))
		if err == nil && len(got) == len(req) {
			_, _ = cb.Write([]byte("done"))
		}
	}()
	_ = a.SetDeadline(time.Now().Add(60 * time.Second))
	buf := make([]byte, 16)
	n, res, err := a.s.Exchange(req, buf, true)
	if res != Exchanged || err != nil || string(buf[:n]) != "done" {
		t.Fatalf("exchange: %d %q %v %v", res, buf[:n], n, err)
	}
}

// BenchmarkRawSocket compares a write and read of a small message on a
// loopback connection, raw against net.Conn.
func BenchmarkRawSocket(b *testing.B) {
	msg, buf := []byte("ping"), make([]byte, 16)
	b.Run("raw", func(b *testing.B) {
		x, y := pair(b)
		b.ReportAllocs()
		for b.Loop() {
			x.Write(msg)
			y.Read(buf)
		}
	})
	b.Run("net", func(b *testing.B) {
		x, y := pair(b)
		xn, yn := x.s.c, y.s.c
		b.ReportAllocs()
		for b.Loop() {
			xn.Write(msg)
			yn.Read(buf)
		}
	})
}
