//go:build linux

package route

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

// rawPair returns both ends of a loopback TCP connection with a rawSocket
// on each.
func rawPair(t testing.TB) (a, b *rawSocket, ca, cb net.Conn) {
	t.Helper()
	ca, cb = tcpPair(t)
	a, b = new(rawSocket), new(rawSocket)
	if !a.reset(ca) || !b.reset(cb) {
		t.Fatal("a TCP connection has no raw socket")
	}
	return a, b, ca, cb
}

// TestRawSocketLikeNet: the raw reader and writer give a caller what
// net.Conn's Read and Write give (the upstream error classification and
// fasthttp depend on it): bytes, io.EOF at a peer close, a timeout error
// named "read" at a deadline, net.ErrClosed after Close, a "write" error
// with the errno after a peer reset.
func TestRawSocketLikeNet(t *testing.T) {
	a, b, ca, cb := rawPair(t)
	if n, err := a.write([]byte("hello")); n != 5 || err != nil {
		t.Fatalf("write: %d %v", n, err)
	}
	buf := make([]byte, 16)
	_ = cb.SetReadDeadline(time.Now().Add(time.Second))
	if n, err := b.read(buf); n != 5 || err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("read: %d %v %q", n, err, buf[:n])
	}

	// A deadline cuts a read that waits, as net.Conn's does.
	_ = cb.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, err := b.read(buf)
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "read" || !op.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v (%#v)", err, op)
	}
	if !isTimeout(err) {
		t.Fatal("the proxy does not classify the raw read's deadline as a timeout")
	}

	// The peer's close is io.EOF (after what it sent).
	_ = cb.SetReadDeadline(time.Time{})
	a.write([]byte("x"))
	ca.Close()
	if n, err := b.read(buf); n != 1 || err != nil {
		t.Fatalf("read before EOF: %d %v", n, err)
	}
	if n, err := b.read(buf); n != 0 || err != io.EOF {
		t.Fatalf("read at the peer's close: %d %v, want io.EOF", n, err)
	}

	// Writing to a peer that is gone fails as a write, with the errno
	// (EPIPE or ECONNRESET, which classify reads as a reset).
	deadline := time.Now().Add(2 * time.Second)
	for {
		_, err = b.write(bytes.Repeat([]byte("y"), 1024))
		if err != nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if !errors.As(err, &op) || op.Op != "write" || !(errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)) {
		t.Fatalf("write to a closed peer: %v", err)
	}
	if !isWriteError(err) {
		t.Fatal("the proxy does not classify the raw write's failure as a write error")
	}

	// Close while a read waits ends the read with net.ErrClosed.
	c, d, cc, _ := rawPair(t)
	_ = d
	done := make(chan error, 1)
	go func() { _, err := c.read(buf[:1]); done <- err }()
	time.Sleep(20 * time.Millisecond)
	cc.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("read cut by Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not end a waiting raw read")
	}
}

// TestRawSocketWriteWaits: a write larger than the socket buffers parks
// when the kernel says EAGAIN and finishes, whole and in order, as the
// peer reads; a write deadline cuts it when the peer does not read.
func TestRawSocketWriteWaits(t *testing.T) {
	a, b, ca, cb := rawPair(t)
	want := make([]byte, 8<<20)
	for i := range want {
		want[i] = byte(i * 7)
	}
	got := make(chan []byte, 1)
	go func() {
		var all []byte
		buf := make([]byte, 4096)
		_ = cb.SetReadDeadline(time.Now().Add(10 * time.Second))
		for len(all) < len(want) {
			n, err := b.read(buf)
			all = append(all, buf[:n]...)
			if err != nil {
				break
			}
		}
		got <- all
	}()
	if n, err := a.write(want); n != len(want) || err != nil {
		t.Fatalf("write: %d of %d, %v", n, len(want), err)
	}
	if g := <-got; !bytes.Equal(g, want) {
		t.Fatalf("the reader got %d bytes, not the %d written in order", len(g), len(want))
	}

	// Nobody reads: the write waits until its deadline.
	_ = ca.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	n, err := a.write(want)
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "write" || !op.Timeout() || n >= len(want) {
		t.Fatalf("write past the deadline: %d %v", n, err)
	}
}

// TestRawSocketAllocs: a read and a write allocate nothing.
func TestRawSocketAllocs(t *testing.T) {
	a, b, _, cb := rawPair(t)
	_ = cb.SetReadDeadline(time.Now().Add(10 * time.Second))
	msg, buf := []byte("ping"), make([]byte, 16)
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := a.write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := b.read(buf); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per write and read, want 0", allocs)
	}
}

// TestConnsReadRaw: the proxy's client connections and its upstream
// connections (also after a redial) read and write through a rawSocket
// when they sit on a TCP socket, and through net.Conn otherwise.
func TestConnsReadRaw(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	dial := func() (net.Conn, error) { return net.Dial("tcp", ln.Addr().String()) }
	c, err := dial()
	if err != nil {
		t.Fatal(err)
	}
	g := newGuardedConn(c, dial)
	defer g.Close()
	if !g.sock.Load().raw.ok() {
		t.Fatal("an upstream TCP connection does not use a raw socket")
	}
	echo := func(conn net.Conn) {
		t.Helper()
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := conn.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4)
		if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "ping" {
			t.Fatalf("echo: %q %v", buf, err)
		}
	}
	echo(g)
	if err := g.redial(); err != nil {
		t.Fatal(err)
	}
	if !g.sock.Load().raw.ok() {
		t.Fatal("a redialed upstream connection does not use a raw socket")
	}
	echo(g)

	cl, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cc := newClientConn(cl, nil)
	defer cc.Close()
	if !cc.raw.ok() {
		t.Fatal("a client TCP connection does not use a raw socket")
	}
	echo(cc)

	p1, p2 := net.Pipe()
	defer p2.Close()
	go func() { _, _ = io.Copy(p2, p2) }()
	pc := newClientConn(p1, nil)
	defer pc.Close()
	if pc.raw.ok() {
		t.Fatal("a connection without a socket claims a raw socket")
	}
	echo(pc)
}

// BenchmarkRawSocket compares a write and read of a small message on a
// loopback connection, raw against net.Conn.
func BenchmarkRawSocket(b *testing.B) {
	msg, buf := []byte("ping"), make([]byte, 16)
	b.Run("raw", func(b *testing.B) {
		x, y, _, _ := rawPair(b)
		b.ReportAllocs()
		for b.Loop() {
			x.write(msg)
			y.read(buf)
		}
	})
	b.Run("net", func(b *testing.B) {
		x, y := tcpPair(b)
		b.ReportAllocs()
		for b.Loop() {
			x.Write(msg)
			y.Read(buf)
		}
	})
}
