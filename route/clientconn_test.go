package route

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/config"
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

// readDeadlineCounter is a net.Conn that records the read deadlines set
// on it and whether each Read found one armed; a Read returns a full
// buffer.
type readDeadlineCounter struct {
	net.Conn
	reads []time.Time
	armed time.Time // the deadline Read waited under
}

func (c *readDeadlineCounter) SetReadDeadline(t time.Time) error {
	c.reads = append(c.reads, t)
	c.armed = t
	return nil
}

func (c *readDeadlineCounter) SetDeadline(t time.Time) error { return c.SetReadDeadline(t) }

func (c *readDeadlineCounter) Read(b []byte) (int, error) { return len(b), nil }

// A client connection arms the read deadline fasthttp's server asks for
// when it reads, and keeps an armed one that lies between the one asked
// for and readSlack later. The server asks for two per request on a
// keep-alive connection (the idle wait's, then server.read_timeout's once
// the request's first byte arrived); a request read whole by the wait's
// read needs no other, and a busy connection re-arms its runtime timer
// about once per readSlack instead of twice per request. Every read waits
// under a deadline no sooner than the one last asked for, and at most
// readSlack later; a zero deadline reaches the socket at once.
func TestClientReadDeadlineIsArmedLazily(t *testing.T) {
	const idle, rt = 90 * time.Second, 30 * time.Second
	sock := &readDeadlineCounter{}
	c := newClientConn(sock, nil)
	c.readSlack = rt / 16
	t0 := time.Unix(1_800_000_000, 0)
	var b [8]byte
	read := func(asked time.Time) {
		t.Helper()
		if _, err := c.Read(b[:]); err != nil {
			t.Fatal(err)
		}
		if sock.armed.Before(asked) || sock.armed.After(asked.Add(rt/16)) {
			t.Fatalf("read under %v, asked for %v (slack %v)", sock.armed, asked, rt/16)
		}
	}
	for i := range 1000 { // a request every millisecond for a second
		now := t0.Add(time.Duration(i) * time.Millisecond)
		c.SetReadDeadline(now.Add(idle)) // waiting for the next request
		read(now.Add(idle))              // the request arrives whole
		c.SetReadDeadline(now.Add(rt))   // its first byte is in
	}
	if len(sock.reads) != 1 || !sock.reads[0].Equal(t0.Add(idle+rt/16)) {
		t.Fatalf("1000 requests in 1s armed %d deadlines (%v...), want one, at t0+idle+slack", len(sock.reads), sock.reads[:min(len(sock.reads), 2)])
	}
	// A request that needs a second read (a trickle, a large body) reads
	// under server.read_timeout from its first byte.
	now := t0.Add(2 * time.Second)
	c.SetReadDeadline(now.Add(idle))
	read(now.Add(idle))
	n := len(sock.reads)
	c.SetReadDeadline(now.Add(rt))
	read(now.Add(rt))
	read(now.Add(rt))
	if len(sock.reads) != n+1 {
		t.Fatalf("a request's later reads armed %v, want one more", sock.reads)
	}
	// Past the slack: armed again.
	late := now.Add(rt/16 + time.Millisecond).Add(idle)
	c.SetReadDeadline(late)
	read(late)
	// A zero deadline reaches the socket at once, and the next one is
	// armed by the next read.
	n = len(sock.reads)
	c.SetReadDeadline(time.Time{})
	if len(sock.reads) != n+1 || !sock.reads[n].IsZero() {
		t.Fatalf("zero deadline: armed %v", sock.reads)
	}
	c.SetReadDeadline(late)
	read(late)
	// SetDeadline arms as asked, and a read deadline inside its slack
	// window is kept.
	c.SetDeadline(late.Add(time.Second))
	n = len(sock.reads)
	c.SetReadDeadline(late.Add(time.Second - time.Millisecond))
	read(late.Add(time.Second - time.Millisecond))
	if len(sock.reads) != n {
		t.Fatalf("SetDeadline then a deadline within its window: armed %v", sock.reads[n:])
	}
}

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

// The lazy read deadline still cuts a keep-alive connection's later
// request that trickles: its reads wait under server.read_timeout from its
// first byte (at most read_timeout/16 later), not under the idle wait's
// 90 s that was armed when that byte arrived.
func TestTricklingKeepAliveRequestIsCutAtReadTimeout(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(200)
	})
	cfg := testConfig(up.URL)
	const rt = 500 * time.Millisecond
	cfg.Server.ReadTimeout = config.Duration(rt)
	tp := startProxy(t, cfg)
	c, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	req := "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
	for i := range 3 { // keep-alive requests read whole
		io.WriteString(c, req)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d", i, resp.StatusCode)
		}
	}
	// The next one trickles its header block, a field every 50 ms.
	started := time.Now()
	io.WriteString(c, "POST /v1/completions HTTP/1.1\r\n")
	stop := make(chan struct{})
	trickled := make(chan struct{})
	go func() {
		defer close(trickled)
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				c.SetWriteDeadline(time.Now().Add(10 * time.Millisecond))
				if _, err := io.WriteString(c, "X-Slow: a\r\n"); err != nil {
					return
				}
			}
		}
	}()
	defer func() { close(stop); <-trickled }()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(br)
	cut := time.Since(started)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("a trickling request still connected after %v (server.read_timeout %v)", cut, rt)
	}
	if len(b) > 0 && !strings.HasPrefix(string(b), "HTTP/1.1 408") {
		t.Errorf("trickling request got %q", b)
	}
	// Cut no sooner than read_timeout, and well before the idle wait's
	// deadline (the bound's margin is for a loaded machine).
	if cut < rt || cut > rt+rt/16+2*time.Second {
		t.Errorf("trickling request cut after %v, want in [%v, %v + %v + 2s]", cut, rt, rt, rt/16)
	}
}
