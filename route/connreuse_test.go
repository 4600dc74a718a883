package route

import (
	"net"
	"testing"
)

// swappableConn is a net.Conn whose addresses a test changes (a redialed
// socket) and whose RemoteAddr calls it counts.
type swappableConn struct {
	net.Conn
	local, remote net.Addr
	remoteCalls   int
}

func (c *swappableConn) LocalAddr() net.Addr  { return c.local }
func (c *swappableConn) RemoteAddr() net.Addr { c.remoteCalls++; return c.remote }

// An upstream connection's remote address is read from its socket once per
// socket (when added, and when a redial gave it a new one, at rekey), not
// on every request fasthttp sends on it; it follows a new socket.
func TestUpstreamRemoteAddrIsReadOncePerSocket(t *testing.T) {
	sock := &swappableConn{
		local:  &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000},
		remote: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2), Port: 8000},
	}
	var table connTable
	c := table.add(&deadlineConn{Conn: sock, conns: &table})
	for range 3 { // three requests: fasthttp's ParseNetConn, then the first write's rekey
		if got := c.RemoteAddr().String(); got != "127.0.0.2:8000" {
			t.Fatalf("remote address %s", got)
		}
		c.rekey()
	}
	if sock.remoteCalls != 1 {
		t.Errorf("3 requests read the socket's remote address %d times, want once", sock.remoteCalls)
	}
	// guardedConn redialed: a new socket, to another address of the backend.
	sock.local = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40001}
	sock.remote = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 3), Port: 8000}
	c.rekey()
	if got := c.RemoteAddr().String(); got != "127.0.0.3:8000" {
		t.Errorf("after a new socket, remote address %s, want the new one", got)
	}
	if _, ok := table.m.Load("127.0.0.1:40001"); !ok {
		t.Error("the connection is not known by its new socket's local address")
	}
}
