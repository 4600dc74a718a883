package route

import (
	"net"
	"testing"
	"time"
)

// deadlineCounter is a net.Conn that records the write deadlines set on it.
type deadlineCounter struct {
	net.Conn
	writes []time.Time
}

func (c *deadlineCounter) SetWriteDeadline(t time.Time) error {
	c.writes = append(c.writes, t)
	return nil
}

func (c *deadlineCounter) SetDeadline(t time.Time) error { return c.SetWriteDeadline(t) }

// A client connection keeps an armed write deadline that lies between the
// one asked for and writeSlack later: fasthttp's server asks for
// now+WriteTimeout before every response, and a busy keep-alive
// connection re-arms its runtime timer about once per writeSlack instead
// of once per response. A write is never cut sooner than asked, a zero
// deadline always reaches the socket, and SetDeadline is what is armed.
func TestClientWriteDeadlineIsArmedLazily(t *testing.T) {
	const w = 60 * time.Second
	sock := &deadlineCounter{}
	c := newClientConn(sock, nil)
	c.writeSlack = w / 16
	t0 := time.Unix(1_800_000_000, 0)
	for i := range 1000 { // a response every millisecond for a second
		if err := c.SetWriteDeadline(t0.Add(time.Duration(i) * time.Millisecond).Add(w)); err != nil {
			t.Fatal(err)
		}
	}
	if len(sock.writes) != 1 || !sock.writes[0].Equal(t0.Add(w+w/16)) {
		t.Fatalf("1000 responses in 1s armed %v, want once, at t0+W+W/16", sock.writes)
	}
	// Past the slack: armed again, never sooner than asked.
	late := t0.Add(w/16 + time.Millisecond).Add(w)
	c.SetWriteDeadline(late)
	if len(sock.writes) != 2 || sock.writes[1].Before(late) {
		t.Fatalf("a deadline past the armed one's slack: armed %v, want >= %v", sock.writes, late)
	}
	// An earlier deadline than the armed one's window is armed at once.
	early := t0.Add(time.Second)
	c.SetWriteDeadline(early)
	if len(sock.writes) != 3 || sock.writes[2].Before(early) || sock.writes[2].After(early.Add(w/16)) {
		t.Fatalf("an earlier deadline: armed %v, want within [%v, +W/16]", sock.writes, early)
	}
	// No deadline reaches the socket, and the next one is armed.
	c.SetWriteDeadline(time.Time{})
	c.SetWriteDeadline(early)
	if len(sock.writes) != 5 || !sock.writes[3].IsZero() || sock.writes[4].Before(early) {
		t.Fatalf("zero then a deadline: armed %v", sock.writes)
	}
	// SetDeadline arms as asked, and a write deadline inside its slack
	// window is kept.
	c.SetDeadline(t0.Add(2 * time.Second))
	c.SetWriteDeadline(t0.Add(2*time.Second - time.Millisecond))
	if len(sock.writes) != 6 {
		t.Fatalf("SetDeadline then a deadline within its window: armed %v", sock.writes)
	}
	// The hijack hand-over clears them: the next write deadline is armed.
	c.SetDeadline(time.Time{})
	c.SetWriteDeadline(t0.Add(2 * time.Second))
	if len(sock.writes) != 8 || !sock.writes[6].IsZero() {
		t.Fatalf("SetDeadline(zero) then a deadline: armed %v", sock.writes)
	}
}

// addrCounter is a net.Conn that counts the calls to RemoteAddr.
type addrCounter struct {
	net.Conn
	addr  net.Addr
	calls int
}

func (c *addrCounter) RemoteAddr() net.Addr { c.calls++; return c.addr }

// The client's IP is formatted for X-Forwarded-For once per connection,
// not once per request.
func TestForwardedIPIsFormattedOncePerConnection(t *testing.T) {
	for _, c := range []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 5}, "10.1.2.3"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 5}, "2001:db8::1"},
		{&net.UnixAddr{Name: "/s", Net: "unix"}, "0.0.0.0"},
	} {
		sock := &addrCounter{addr: c.addr}
		cc := newClientConn(sock, nil)
		for range 3 {
			if got := string(cc.forwardedIP()); got != c.want {
				t.Fatalf("%v: %q, want %q", c.addr, got, c.want)
			}
		}
		if sock.calls != 1 {
			t.Errorf("%v: RemoteAddr called %d times for 3 requests, want once", c.addr, sock.calls)
		}
	}
}
