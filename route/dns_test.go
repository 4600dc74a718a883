package route

import (
	"context"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/internal/vllmsim"
)

// fakeDNS is a resolver whose answer the test changes at will.
type fakeDNS struct {
	mu      sync.Mutex
	ips     []string
	lookups int // answered lookups, so a test can wait for refreshes
}

// answered returns how many lookups were answered.
func (d *fakeDNS) answered() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lookups
}

func (d *fakeDNS) set(ips ...string) {
	d.mu.Lock()
	d.ips = append([]string(nil), ips...)
	d.mu.Unlock()
}

func (d *fakeDNS) lookup(_ context.Context, host string) ([]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if host != "pods.test" {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	d.lookups++
	return append([]string(nil), d.ips...), nil
}

// dnsPods starts one simulated pod on each of the loopback addresses ips,
// all on the same port, as a headless Service's pods would be.
func dnsPods(t *testing.T, ips ...string) (port string, pods []*vllmsim.Server) {
	t.Helper()
	sim := vllmsim.DefaultConfig()
	sim.TimeScale = 0.1
	for attempt := 0; attempt < 10; attempt++ {
		ln, err := net.Listen("tcp", ips[0]+":0")
		if err != nil {
			t.Fatal(err)
		}
		port = strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		ln.Close()
		pods = pods[:0]
		ok := true
		for _, ip := range ips {
			s := vllmsim.NewServer(sim)
			if err := s.Start(net.JoinHostPort(ip, port)); err != nil {
				ok = false
				break
			}
			pods = append(pods, s)
		}
		if ok {
			t.Cleanup(func() {
				for _, s := range pods {
					s.Close()
				}
			})
			return port, pods
		}
		for _, s := range pods {
			s.Close()
		}
	}
	t.Fatal("no common free port on the loopback addresses")
	return "", nil
}

// DNS discovery: names added and removed while traffic flows; a removed
// pod's in-flight streams finish; it then gets no new requests.
func TestDNSPodsAddedAndRemovedUnderTraffic(t *testing.T) {
	port, pods := dnsPods(t, "127.0.0.1", "127.0.0.2", "127.0.0.3")
	dns := &fakeDNS{}
	dns.set("127.0.0.1", "127.0.0.2")
	cfg := testConfig()
	cfg.Backends.DNS = "pods.test:" + port
	cfg.Backends.DNSRefresh = config.Duration(30 * time.Millisecond)
	tp := startProxy(t, cfg, func(o *Options) { o.LookupHost = dns.lookup })
	addr := func(i int) string { return pods[i].Addr() }
	inPool := func() []string {
		var out []string
		for _, b := range tp.DebugBackends() {
			out = append(out, b.Address)
		}
		return out
	}
	if got := inPool(); !slices.Equal(got, []string{addr(0), addr(1)}) {
		t.Fatalf("initial pool %v", got)
	}

	// Steady traffic for the whole test; every request must succeed.
	var failures atomic.Int64
	var sent atomic.Int64
	stop := loadLoop(2, func() bool {
		resp, err := client().Post(tp.url("/v1/completions"), "application/json", strings.NewReader(ftBody(2, false)))
		sent.Add(1)
		if err != nil {
			failures.Add(1)
			return true
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			failures.Add(1)
		}
		return true
	})

	// A stream in flight on pod 0, which DNS is about to drop.
	var stream <-chan ftStreamResult
	for i := 0; i < 20 && stream == nil; i++ {
		c := ftOpenStream(t, tp.url("/v1/completions"), ftBody(800, true))
		if ftBackend(tp, addr(0)).Inflight > 0 {
			stream = c
			break
		}
		go func() { <-c }() // landed elsewhere: let it finish
	}
	if stream == nil {
		t.Fatal("no stream landed on pod 0")
	}

	// Add pod 2, remove pod 0.
	dns.set("127.0.0.2", "127.0.0.3")
	ftPoll(t, 2*time.Second, "the pool follows DNS", func() bool {
		return slices.Equal(inPool(), []string{addr(1), addr(2)})
	})
	ftPoll(t, 3*time.Second, "the added pod receives traffic", func() bool { return ftServed(t, tp, addr(2)) > 0 })
	servedByRemoved := ftServed(t, tp, addr(0))

	select {
	case r := <-stream:
		if !r.done || r.errFrame || r.err != nil {
			t.Fatalf("the removed pod's in-flight stream did not finish cleanly: %+v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the removed pod's in-flight stream hung")
	}
	ftPoll(t, 2*time.Second, "the drained pod is forgotten", func() bool {
		tp.mu.Lock()
		defer tp.mu.Unlock()
		_, ok := tp.backends[addr(0)]
		return !ok
	})
	stop()
	// The stream itself settles as one more 200 on the removed pod; no new
	// request reached it.
	if got := ftServed(t, tp, addr(0)); got > servedByRemoved+1 {
		t.Errorf("the removed pod served %v requests after removal", got-servedByRemoved)
	}
	if f := failures.Load(); f > 0 {
		t.Fatalf("%d of %d requests failed while DNS changed", f, sent.Load())
	}
	// A DNS outage keeps the last pool.
	// Wait for three refreshes to see the empty answer (counted, not slept
	// for: a loaded machine delays refreshes, it does not skip them).
	dns.set()
	seen := dns.answered()
	ftPoll(t, 100*cfg.Backends.DNSRefresh.D(), "three refreshes with the empty answer", func() bool {
		return dns.answered() >= seen+3
	})
	if got := inPool(); !slices.Equal(got, []string{addr(1), addr(2)}) {
		t.Fatalf("an empty DNS answer emptied the pool: %v", got)
	}
}
