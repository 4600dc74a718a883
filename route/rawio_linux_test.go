//go:build linux

package route

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/rawconn"
)

// rawPair returns both ends of a loopback TCP connection with a
// rawconn.Socket on each.
func rawPair(t testing.TB) (a, b *rawconn.Socket, ca, cb net.Conn) {
	t.Helper()
	ca, cb = tcpPair(t)
	a, b = new(rawconn.Socket), new(rawconn.Socket)
	if !a.Reset(ca) || !b.Reset(cb) {
		t.Fatal("a TCP connection has no raw socket")
	}
	return a, b, ca, cb
}

// TestRawErrorsClassify: the proxy classifies a raw socket's failures as
// it does net.Conn's (rawconn's own tests check they are net's errors): a
// read past its deadline is a timeout, a write to a peer that is gone a
// write error.
func TestRawErrorsClassify(t *testing.T) {
	a, b, ca, cb := rawPair(t)
	buf := make([]byte, 16)
	_ = cb.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := b.Read(buf); !isTimeout(err) {
		t.Fatalf("read past the deadline: %v, not classified as a timeout", err)
	}
	_ = cb.SetReadDeadline(time.Time{})
	ca.Close()
	_ = a
	var err error
	deadline := time.Now().Add(2 * time.Second)
	for err == nil && time.Now().Before(deadline) {
		_, err = b.Write(bytes.Repeat([]byte("y"), 1024))
		time.Sleep(time.Millisecond)
	}
	if !isWriteError(err) {
		t.Fatalf("write to a closed peer: %v, not classified as a write error", err)
	}
}

// TestConnsReadRaw: the proxy's client connections and its upstream
// connections (also after a redial) read and write through a raw socket
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
	if !g.sock.Load().raw.OK() {
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
	if !g.sock.Load().raw.OK() {
		t.Fatal("a redialed upstream connection does not use a raw socket")
	}
	echo(g)

	cl, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cc := newClientConn(cl, nil)
	defer cc.Close()
	if !cc.raw.OK() {
		t.Fatal("a client TCP connection does not use a raw socket")
	}
	echo(cc)

	p1, p2 := net.Pipe()
	defer p2.Close()
	go func() { _, _ = io.Copy(p2, p2) }()
	pc := newClientConn(p1, nil)
	defer pc.Close()
	if pc.raw.OK() {
		t.Fatal("a connection without a socket claims a raw socket")
	}
	echo(pc)
}
