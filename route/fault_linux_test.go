package route

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/config"
)

// blackHole returns the URL of a loopback port whose accept queue is full:
// the kernel drops further SYNs, so a dial hangs as it would to a pod
// whose node vanished.
func blackHole(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Skipf("raw socket: %v", err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
	// Fill the accept queue, then make sure the next dial hangs.
	for i := 0; i < 4; i++ {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err != nil {
			return "http://" + addr
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Skip("this kernel does not drop SYNs on a full accept queue")
	return ""
}

// A pod that swallows SYNs costs a request at most upstream.connect_timeout,
// after which the request (that never left) goes to another pod; once the
// breaker opens, requests stop paying even that.
func TestBlackHoledPodCostsAtMostConnectTimeout(t *testing.T) {
	hole := blackHole(t)
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(200)
	})
	cfg := testConfig(hole, up.URL)
	cfg.Route.Policy = "round_robin"
	cfg.Upstream.ConnectTimeout = config.Duration(200 * time.Millisecond)
	cfg.Breaker.OpenFor = config.Duration(10 * time.Second)
	tp := startProxy(t, cfg)
	for i := 0; i < 12; i++ {
		start := time.Now()
		resp := post(t, tp.url("/v1/completions"), `{}`)
		resp.Body.Close()
		d := time.Since(start)
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d, want 200 from the live pod", i, resp.StatusCode)
		}
		if d > cfg.Upstream.ConnectTimeout.D()+500*time.Millisecond {
			t.Fatalf("request %d took %v, want at most connect_timeout (%v) more than usual", i, d, cfg.Upstream.ConnectTimeout.D())
		}
	}
	// Counted by the proxy, not timed by the test: on a loaded machine an
	// ordinary request can be slow too.
	paid := tp.counter(t, "probegate_retries_total", map[string]string{"reason": "connect"})
	if paid < 1 || paid > float64(cfg.Breaker.ConsecutiveFailures) {
		t.Fatalf("%v requests paid the connect timeout, want 1 to breaker.consecutive_failures (%d)", paid, cfg.Breaker.ConsecutiveFailures)
	}
}
