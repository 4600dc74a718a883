package route

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/probegate/probegate/internal/config"
)

// blockingDNS is a resolver whose answer the test sets, and whose lookups
// can be made to hang (until released or their context ends), as a slow
// or unreachable DNS server does.
type blockingDNS struct {
	fakeDNS
	mu      sync.Mutex
	hold    chan struct{} // non-nil: lookups block until it is closed
	entered chan struct{} // receives once per blocked lookup
	fail    bool
}

func newBlockingDNS() *blockingDNS { return &blockingDNS{entered: make(chan struct{}, 16)} }

func (d *blockingDNS) block() {
	d.mu.Lock()
	d.hold = make(chan struct{})
	d.mu.Unlock()
}

func (d *blockingDNS) release() {
	d.mu.Lock()
	if d.hold != nil {
		close(d.hold)
		d.hold = nil
	}
	d.mu.Unlock()
}

func (d *blockingDNS) setFail(f bool) {
	d.mu.Lock()
	d.fail = f
	d.mu.Unlock()
}

func (d *blockingDNS) lookup(ctx context.Context, host string) ([]string, error) {
	d.mu.Lock()
	hold, fail := d.hold, d.fail
	d.mu.Unlock()
	if hold != nil {
		d.entered <- struct{}{}
		select {
		case <-hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if fail {
		return nil, &net.DNSError{Err: "server misbehaving", Name: host, IsTemporary: true}
	}
	return d.fakeDNS.lookup(ctx, host)
}

// A lookup that hangs must not stall the request path: a stream on a
// backend that DNS removed (draining) ends, settles and its backend is
// reaped while the lookup still hangs.
func TestDNSLookupHoldsNoLock(t *testing.T) {
	port, pods := dnsPods(t, "127.0.0.1", "127.0.0.2")
	dns := newBlockingDNS()
	dns.set("127.0.0.1", "127.0.0.2")
	cfg := testConfig()
	cfg.Backends.DNS = "pods.test:" + port
	cfg.Backends.DNSRefresh = config.Duration(20 * time.Millisecond)
	tp := startProxy(t, cfg, func(o *Options) { o.LookupHost = dns.lookup })
	t.Cleanup(dns.release)
	victim := pods[0].Addr()

	// A stream of about a second on the pod DNS is about to drop.
	var stream <-chan ftStreamResult
	for i := 0; i < 20 && stream == nil; i++ {
		c := ftOpenStream(t, tp.url("/v1/completions"), ftBody(300, true))
		if ftBackend(tp, victim).Inflight > 0 {
			stream = c
			break
		}
		go func() { <-c }()
	}
	if stream == nil {
		t.Fatal("no stream landed on the pod to remove")
	}
	tp.mu.Lock()
	b := tp.backends[victim]
	tp.mu.Unlock()

	dns.set("127.0.0.2")
	ftPoll(t, 2*time.Second, "the removed pod drains", func() bool { return b.draining.Load() })
	dns.block()
	select {
	case <-dns.entered:
	case <-time.After(2 * time.Second):
		t.Fatal("no lookup started")
	}
	// The lookup now hangs (up to its 2 s timeout). The stream ends on its
	// own and must settle at once.
	var r ftStreamResult
	select {
	case r = <-stream:
	case <-time.After(5 * time.Second):
		t.Fatal("the draining pod's stream hung")
	}
	if !r.done || r.errFrame {
		t.Fatalf("stream on the draining pod: %+v", r)
	}
	ftPoll(t, 500*time.Millisecond, "the drained pod is reaped while the lookup hangs", func() bool { return b.closed.Load() })
	select {
	case <-dns.entered:
		// Another lookup started: the first one ended (timed out) before
		// the stream settled, so settling waited for it.
		t.Fatal("the stream settled only after the hung lookup ended: a lock is held across the lookup")
	default:
	}
	// Reload and a request go through as well while the lookup hangs.
	done := make(chan error, 1)
	go func() { done <- tp.Reload(cfg) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Second):
		t.Fatal("Reload waited for the hung lookup")
	}
	if err := rtDo(tp, false, 2); err != nil {
		t.Fatal(err)
	}
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) count(sub string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), sub)
}

// DNS failures are logged on the transition only: the first failure once
// (warn), the recovery once (info), however many lookups fail.
func TestDNSLogsTransitionsOnce(t *testing.T) {
	port, pods := dnsPods(t, "127.0.0.1")
	dns := newBlockingDNS()
	dns.set("127.0.0.1")
	var logs syncBuffer
	cfg := testConfig()
	cfg.Backends.DNS = "pods.test:" + port
	cfg.Backends.DNSRefresh = config.Duration(5 * time.Millisecond)
	// first_byte_timeout/8 and idle_timeout/8 above scrape.timeout: the
	// only warnings are the DNS ones (TestProgressCutWarnsOnceNamingTheKeys).
	cfg.Upstream.FirstByteTimeout = config.Duration(8 * time.Second)
	cfg.Upstream.IdleTimeout = config.Duration(8 * time.Second)
	tp := startProxy(t, cfg, func(o *Options) {
		o.LookupHost = dns.lookup
		o.Logger = zerolog.New(&logs)
	})
	const failing, recovered = "backends.dns lookup failing", "backends.dns lookup recovered"
	for round := 1; round <= 2; round++ {
		dns.setFail(true)
		ftPoll(t, 2*time.Second, "the failure is logged", func() bool { return logs.count(failing) == round })
		time.Sleep(100 * time.Millisecond) // about 20 more failed lookups
		if got := logs.count(failing); got != round {
			t.Fatalf("round %d: %q logged %d times, want %d", round, failing, got, round)
		}
		if got := logs.count(`"level":"warn"`); got != round {
			t.Fatalf("round %d: %d warnings, want %d", round, got, round)
		}
		dns.setFail(false)
		ftPoll(t, time.Second, "recovery is logged", func() bool { return logs.count(recovered) == round })
		time.Sleep(50 * time.Millisecond)
		if got := logs.count(recovered); got != round {
			t.Fatalf("round %d: %q logged %d times, want %d", round, recovered, got, round)
		}
	}
	// The pool survived the outages.
	if got := tp.DebugBackends(); len(got) != 1 || got[0].Address != pods[0].Addr() {
		t.Fatalf("pool after the outages: %+v", got)
	}
}

// seriesCount returns the number of series of every probegate_ family.
func seriesCount(t *testing.T, tp *testProxy) int {
	t.Helper()
	mfs, err := tp.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "probegate_") {
			n += len(mf.GetMetric())
		}
	}
	return n
}

// Pod churn does not grow /metrics: 200 backends added and removed
// through DNS, each scraped and sent requests, leave the number of series
// where it started.
func TestRemovedBackendsSeriesAreDeleted(t *testing.T) {
	// One tiny model server answering on 127.0.1.1 .. 127.0.1.200, all on
	// one port, as 200 pods of a headless Service.
	const n = 200
	ips := make([]string, n+1)
	for i := range ips {
		ips[i] = fmt.Sprintf("127.0.1.%d", i+1)
	}
	steady := ips[n] // 127.0.1.201: the pod that stays
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"choices":[{"text":"x"}]}`))
	})}
	var port string
	var lns []net.Listener
	for attempt := 0; attempt < 10 && len(lns) < n+1; attempt++ {
		for _, ln := range lns {
			ln.Close()
		}
		lns = lns[:0]
		first, err := net.Listen("tcp", ips[0]+":0")
		if err != nil {
			t.Fatal(err)
		}
		port = strconv.Itoa(first.Addr().(*net.TCPAddr).Port)
		lns = append(lns, first)
		for _, ip := range ips[1:] {
			ln, err := net.Listen("tcp", net.JoinHostPort(ip, port))
			if err != nil {
				break
			}
			lns = append(lns, ln)
		}
	}
	if len(lns) < n+1 {
		t.Skip("no common free port on 200 loopback addresses")
	}
	for _, ln := range lns {
		go srv.Serve(ln)
	}
	t.Cleanup(func() { srv.Close() })

	dns := newBlockingDNS()
	dns.set(steady)
	cfg := testConfig()
	cfg.Route.Policy = "cached"
	cfg.Backends.DNS = "pods.test:" + port
	cfg.Backends.DNSRefresh = config.Duration(10 * time.Millisecond)
	cfg.Scrape.Interval = config.Duration(10 * time.Millisecond)
	cfg.Scrape.MinInterval = config.Duration(10 * time.Millisecond)
	cfg.Upstream.IdleConnTTL = config.Duration(100 * time.Millisecond)
	tp := startProxy(t, cfg, func(o *Options) {
		o.LookupHost = dns.lookup
		o.Fetcher = instantFetcher{now: time.Now}
	})
	ftPoll(t, 2*time.Second, "the steady pod is scraped", func() bool {
		return tp.counter(t, "probegate_scrapes_total", map[string]string{"backend": net.JoinHostPort(steady, port)}) > 0
	})
	if err := rtDo(tp, false, 1); err != nil {
		t.Fatal(err)
	}
	start := seriesCount(t, tp)

	peak := 0
	for round := 0; round < 4; round++ {
		batch := append([]string{steady}, ips[round*50:(round+1)*50]...)
		dns.set(batch...)
		ftPoll(t, 2*time.Second, "the pool follows DNS", func() bool { return len(tp.DebugBackends()) == len(batch) })
		// Requests and scrapes create each backend's series.
		for i := 0; i < 60; i++ {
			if err := rtDo(tp, false, 1); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		time.Sleep(50 * time.Millisecond)
		peak = max(peak, seriesCount(t, tp))
	}
	dns.set(steady)
	ftPoll(t, 2*time.Second, "the pool shrinks back", func() bool { return len(tp.DebugBackends()) == 1 })
	if peak < start+100 {
		t.Fatalf("series peaked at %d from %d: the churn did not create per-backend series", peak, start)
	}
	ftPoll(t, 3*time.Second, fmt.Sprintf("series return to %d (peak %d)", start, peak), func() bool {
		return seriesCount(t, tp) == start
	})
	tp.mu.Lock()
	left := len(tp.backends)
	tp.mu.Unlock()
	if left != 1 {
		t.Fatalf("%d backends still known after removal, want 1", left)
	}
}
