package route

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// keepAlive is a socket's TCP keep-alive options as the kernel holds them.
type keepAlive struct{ on, idle, interval, count int }

func keepAliveOf(t *testing.T, c net.Conn) keepAlive {
	t.Helper()
	sc, ok := c.(syscall.Conn)
	if !ok {
		t.Fatalf("%T has no socket", c)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var ka keepAlive
	var gerr error
	get := func(fd, level, opt int) int {
		v, err := syscall.GetsockoptInt(fd, level, opt)
		if err != nil && gerr == nil {
			gerr = err
		}
		return v
	}
	if err := rc.Control(func(fd uintptr) {
		ka = keepAlive{
			on:       get(int(fd), syscall.SOL_SOCKET, syscall.SO_KEEPALIVE),
			idle:     get(int(fd), syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE),
			interval: get(int(fd), syscall.IPPROTO_TCP, syscall.TCP_KEEPINTVL),
			count:    get(int(fd), syscall.IPPROTO_TCP, syscall.TCP_KEEPCNT),
		}
	}); err != nil {
		t.Fatal(err)
	}
	if gerr != nil {
		t.Fatal(gerr)
	}
	return ka
}

// keepAliveTimerArmed reports whether the kernel's keep-alive timer runs on
// the IPv4 TCP socket from local to remote (/proc/net/tcp: timer 2).
func keepAliveTimerArmed(t *testing.T, local, remote net.Addr) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Skipf("no /proc/net/tcp: %v", err)
	}
	hex := func(a net.Addr) string {
		ta := a.(*net.TCPAddr)
		ip := ta.IP.To4()
		return fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], ta.Port)
	}
	l, r := hex(local), hex(remote)
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 5 && f[1] == l && f[2] == r {
			return strings.HasPrefix(f[5], "02:")
		}
	}
	t.Fatalf("socket %s -> %s not in /proc/net/tcp", local, remote)
	return false
}

// TestClientConnectionsKeepTCPKeepAlive: the connection the proxy serves a
// client on (accepted by Listen's listener, which sets the keep-alive
// options once on the listening socket) has the same keep-alive options as
// a connection net.Listen's listener accepts (Go's per-connection default),
// and the kernel runs its keep-alive timer, so a client that vanished
// without a FIN is found.
func TestClientConnectionsKeepTCPKeepAlive(t *testing.T) {
	// What Go gives a connection its listener accepts.
	ref, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	rc, err := net.Dial("tcp", ref.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	rs, err := ref.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	want := keepAliveOf(t, rs)
	if want != (keepAlive{1, 15, 15, 9}) {
		t.Logf("net.Listen's accepted connection: %+v", want)
	}

	up := upstream(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	tp := startProxy(t, testConfig(up.URL))
	c, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("through the proxy: %d %q", resp.StatusCode, body)
	}

	// The proxy's side of c: the clientConn it serves c on.
	var served *clientConn
	for i := range tp.conns.shards {
		tp.conns.shards[i].each(func(cc *clientConn) {
			if cc.RemoteAddr().String() == c.LocalAddr().String() {
				served = cc
			}
		})
	}
	if served == nil {
		t.Fatal("the client's connection is not among the proxy's connections")
	}
	if got := keepAliveOf(t, served.Conn); got != want || got.on == 0 {
		t.Fatalf("keep-alive of the proxy's client connection: %+v, want %+v (net.Listen's accepted connection)", got, want)
	}
	if !keepAliveTimerArmed(t, served.LocalAddr(), served.RemoteAddr()) {
		t.Fatal("the kernel runs no keep-alive timer on the proxy's client connection")
	}
	if !keepAliveTimerArmed(t, rs.LocalAddr(), rs.RemoteAddr()) {
		t.Fatal("the kernel runs no keep-alive timer on net.Listen's accepted connection")
	}
}

// BenchmarkAccept: one client connection dialled, accepted, and closed at
// both ends, through net.Listen's listener and through Listen's. It
// reports the process's CPU time per connection (getrusage: user and
// system), dialler's included; the difference between the two is the
// accepted side's keep-alive set-up.
func BenchmarkAccept(b *testing.B) {
	for _, tc := range []struct {
		name   string
		listen func() (net.Listener, error)
	}{
		{"net.Listen", func() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }},
		{"route.Listen", func() (net.Listener, error) { return Listen("127.0.0.1:0") }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ln, err := tc.listen()
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			addr := ln.Addr().String()
			var ru0, ru1 syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
			b.ResetTimer()
			for b.Loop() {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					b.Fatal(err)
				}
				s, err := ln.Accept()
				if err != nil {
					b.Fatal(err)
				}
				_ = s.Close()
				_ = c.Close()
			}
			b.StopTimer()
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
			cpu := time.Duration(syscall.TimevalToNsec(ru1.Utime) - syscall.TimevalToNsec(ru0.Utime) +
				syscall.TimevalToNsec(ru1.Stime) - syscall.TimevalToNsec(ru0.Stime))
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/conn")
		})
	}
}
