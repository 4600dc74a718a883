package route

import (
	"net"
	"testing"
	"time"
)

// peerWroteOrClosed checks c once with a fresh peeker.
func peerWroteOrClosed(c net.Conn) bool {
	var p peeker
	p.reset(c)
	return p.wroteOrClosed()
}

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t testing.TB) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() { c, _ := ln.Accept(); acc <- c }()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-acc
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

func TestPeerWroteOrClosed(t *testing.T) {
	c, s := tcpPair(t)
	if peerWroteOrClosed(c) {
		t.Fatal("an idle connection reported readable")
	}
	s.Write([]byte("x"))
	deadline := time.Now().Add(time.Second)
	for !peerWroteOrClosed(c) {
		if time.Now().After(deadline) {
			t.Fatal("unread bytes not seen")
		}
		time.Sleep(time.Millisecond)
	}
	// Peeking consumed nothing.
	b := make([]byte, 1)
	c.SetReadDeadline(time.Now().Add(time.Second))
	if n, err := c.Read(b); n != 1 || err != nil || b[0] != 'x' {
		t.Fatalf("read %d %v %q after the peek", n, err, b)
	}
	c2, s2 := tcpPair(t)
	s2.Close()
	deadline = time.Now().Add(time.Second)
	for !peerWroteOrClosed(c2) {
		if time.Now().After(deadline) {
			t.Fatal("a peer close not seen")
		}
		time.Sleep(time.Millisecond)
	}
}

// BenchmarkPeerWroteOrClosed is the guard's cost per request on a reused
// connection: one non-blocking recv.
func BenchmarkPeerWroteOrClosed(b *testing.B) {
	c, _ := tcpPair(b)
	var p peeker
	p.reset(c)
	b.ReportAllocs()
	for b.Loop() {
		if p.wroteOrClosed() {
			b.Fatal("readable")
		}
	}
}
