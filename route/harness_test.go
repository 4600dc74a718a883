package route

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/probegate/probegate/internal/config"
)

func TestMain(m *testing.M) {
	cleanup, err := trustTestCert()
	if err != nil {
		fmt.Fprintln(os.Stderr, "TestMain:", err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, append([]goleak.Option{
		goleak.Cleanup(func(code int) { cleanup(); os.Exit(code) }),
	}, fasthttpSleepers...)...)
}

// fasthttpSleepers are fasthttp's own background sleepers: the
// idle-connection cleaner of each HostClient, the dialer's address cache
// cleaner, the worker pool cleaner, and the server date updater, which
// the first server response of the process starts once (serverDateOnce)
// and which then runs for the life of the process. None of them is ours.
var fasthttpSleepers = []goleak.Option{
	goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
	goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
	goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
	goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
}

// noGoroutineLeft notes the goroutines running now; the function it
// returns (defer it) fails t if any other is still running then, besides
// fasthttp's sleepers. Whether a test is the process's first fasthttp
// user (it starts the date updater) does not change its verdict.
func noGoroutineLeft(t *testing.T) func() {
	t.Helper()
	opts := append([]goleak.Option{goleak.IgnoreCurrent()}, fasthttpSleepers...)
	return func() { t.Helper(); goleak.VerifyNone(t, opts...) }
}

// testConfig returns a configuration for tests: the given backends, fast
// breaker timings, no access log.
//
// Its upstream.first_byte_timeout and idle_timeout (10 s) are far above
// any answer of a test's in-process backends, so that only the tests that
// set them shorter, to prove what a timeout does, ever see one. At 2 s
// (until session 15) a -race test process at idle priority behind other
// work, starved for seconds at a time, got 504s ("the model server did
// not answer in time") in tests about other things (probe_e2e, hostile,
// retry and TLS tests in s14's loaded runs). No test relied on the 2 s:
// the whole route package passes with 10 s, none of it slower but
// TestTokenWorkCountsAFreshPromptWhole, whose hanging request is now cut
// at Shutdown's grace instead of at its timeout.
func testConfig(backends ...string) *config.Config {
	c := config.Default()
	c.Backends.Static = backends
	// Most forwarding tests use paths of their own (/a, /ws, /slow):
	// allow_test.go and the retry tests exercise the default allowlist.
	c.Route.AllowPaths = []string{"/*"}
	c.Route.Policy = "least_inflight"
	c.Log.Access = false
	c.Breaker.OpenFor = config.Duration(300 * time.Millisecond)
	c.Breaker.ConsecutiveFailures = 3
	c.Upstream.FirstByteTimeout = config.Duration(10 * time.Second)
	c.Upstream.IdleTimeout = config.Duration(10 * time.Second)
	c.Server.ShutdownGrace = config.Duration(5 * time.Second)
	c.Server.EventLoop = testEventLoop
	return c
}

// testEventLoop: PROBEGATE_TEST_EVENT_LOOP=1 runs every test built on
// testConfig with server.event_loop on (the whole suite over the loop
// path; evloop_parity_test.go runs its tests over both paths always).
var testEventLoop = os.Getenv("PROBEGATE_TEST_EVENT_LOOP") == "1"

// testProxy is a Proxy serving on a loopback listener.
type testProxy struct {
	*Proxy
	addr string
	reg  *prometheus.Registry
}

// startProxy serves cfg on 127.0.0.1 and stops it at cleanup.
func startProxy(t *testing.T, cfg *config.Config, mut ...func(*Options)) *testProxy {
	t.Helper()
	reg := prometheus.NewRegistry()
	opts := Options{Config: cfg, Registerer: reg}
	for _, m := range mut {
		m(&opts)
	}
	p, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if cfg.Server.EventLoop {
		// server.event_loop: two loops, as on this 2-core machine.
		a, err := p.ServeLoops("127.0.0.1:0", 2)
		if err != nil {
			p.Close()
			t.Fatalf("ServeLoops: %v", err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = p.Shutdown(ctx)
		})
		return &testProxy{Proxy: p, addr: a.String(), reg: reg}
	}
	return serveProxy(t, p, reg, nil)
}

// serveProxy serves p on a new listener on 127.0.0.1 (wrapped by wrap
// when not nil) and stops it at cleanup.
func serveProxy(t *testing.T, p *Proxy, reg *prometheus.Registry, wrap func(net.Listener) net.Listener) *testProxy {
	t.Helper()
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := ln
	if wrap != nil {
		served = wrap(ln)
	}
	done := make(chan struct{})
	go func() { _ = p.Serve(served); close(done) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Shutdown(ctx)
		<-done
	})
	return &testProxy{Proxy: p, addr: ln.Addr().String(), reg: reg}
}

// url returns the proxy URL of path.
func (tp *testProxy) url(path string) string { return "http://" + tp.addr + path }

// counter returns the value of a counter family's series with the given
// label values (all series summed when labels is empty).
func (tp *testProxy) counter(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := tp.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if matches(m, labels) {
				if m.Counter != nil {
					sum += m.Counter.GetValue()
				} else if m.Gauge != nil {
					sum += m.Gauge.GetValue()
				}
			}
		}
	}
	return sum
}

func matches(m *dto.Metric, labels map[string]string) bool {
	for k, v := range labels {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == k && lp.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// upstream starts a fake model server with handler h.
func upstream(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

// deadAddr returns a loopback URL on which nothing listens.
func deadAddr(t *testing.T) string {
	t.Helper()
	return deadAddrs(t, 1)[0]
}

// deadAddrs returns n distinct URLs nothing listens on: the ports are all
// bound before any is released (two deadAddr calls in a row can get the
// same port back, and a config listing one backend twice is refused).
func deadAddrs(t *testing.T, n int) []string {
	t.Helper()
	var urls []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		urls = append(urls, "http://"+ln.Addr().String())
	}
	return urls
}

// client returns an HTTP client that does not reuse connections across
// tests. Its 30 s bound is above testConfig's upstream timeouts (10 s), so
// a request the proxy holds too long gets the proxy's answer, not the
// client's timeout.
func client() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
}

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := client().Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	return resp
}

// loadLoop starts workers goroutines that call req back to back until the
// returned stop function is called (stop waits for them). A worker whose req
// returns false stops early.
func loadLoop(workers int, req func() bool) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				if !req() {
					return
				}
			}
		}()
	}
	return func() { close(done); wg.Wait() }
}
