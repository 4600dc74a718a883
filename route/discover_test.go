package route

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/probegate/probegate/internal/config"
)

// fakeDiscover is a Discover whose sets the test pushes by hand.
type fakeDiscover struct {
	mu      sync.Mutex
	initial []Target
	publish func([]Target)
	starts  int
	stops   int
	err     error
}

func (f *fakeDiscover) start(_ config.Kubernetes, _ zerolog.Logger, publish func([]Target)) ([]Target, func(), error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, nil, f.err
	}
	f.starts++
	f.publish = publish
	return f.initial, func() {
		f.mu.Lock()
		f.stops++
		f.mu.Unlock()
	}, nil
}

func (f *fakeDiscover) push(ts ...Target) {
	f.mu.Lock()
	pub := f.publish
	f.mu.Unlock()
	pub(ts)
}

func kubeConfig() *config.Config {
	c := testConfig()
	c.Backends.Static = nil
	c.Backends.Kubernetes = config.Kubernetes{Service: "vllm", Namespace: "models", Port: 8000}
	return c
}

func poolAddrs(p *Proxy) string {
	var s []string
	for _, b := range p.Pool().Backends() {
		s = append(s, b.Addr()+"="+b.Origin())
	}
	return strings.Join(s, ",")
}

func TestDiscoverAppliesEachSet(t *testing.T) {
	f := &fakeDiscover{initial: []Target{{URL: "10.0.0.1:8000", Origin: "kubernetes:endpointslice/models/vllm-a"}}}
	p, err := New(Options{Config: kubeConfig(), Discover: f.start})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if got := poolAddrs(p); got != "10.0.0.1:8000=kubernetes:endpointslice/models/vllm-a" {
		t.Fatalf("initial pool %q", got)
	}
	f.push(Target{URL: "10.0.0.2:8000", Origin: "kubernetes:endpointslice/models/vllm-b"},
		Target{URL: "10.0.0.1:8000", Origin: "kubernetes:endpointslice/models/vllm-b"})
	if got := poolAddrs(p); got != "10.0.0.1:8000=kubernetes:endpointslice/models/vllm-b,10.0.0.2:8000=kubernetes:endpointslice/models/vllm-b" {
		t.Fatalf("pool after publish %q", got)
	}
	info := p.DebugBackends()
	if len(info) != 2 || info[0].Origin != "kubernetes:endpointslice/models/vllm-b" {
		t.Fatalf("/debug/backends origins: %+v", info)
	}

	// A reload that keeps backends.kubernetes keeps the watch and its set.
	if err := p.Reload(kubeConfig()); err != nil {
		t.Fatal(err)
	}
	if f.starts != 1 || f.stops != 0 || p.Pool().Len() != 2 {
		t.Fatalf("reload with the same source: starts=%d stops=%d pool=%d", f.starts, f.stops, p.Pool().Len())
	}
	// A reload to a static list stops the watch; a late publish is ignored.
	static := testConfig("http://127.0.0.1:1")
	if err := p.Reload(static); err != nil {
		t.Fatal(err)
	}
	if f.stops != 1 {
		t.Fatalf("stops = %d after switching to static", f.stops)
	}
	f.push(Target{URL: "10.0.0.9:8000", Origin: "late"})
	if got := poolAddrs(p); got != "127.0.0.1:1=static" {
		t.Fatalf("pool after switching to static %q", got)
	}
}

func TestDiscoverMissingOrFailing(t *testing.T) {
	if _, err := New(Options{Config: kubeConfig()}); !errors.Is(err, errNoDiscover) {
		t.Fatalf("New without Discover: %v", err)
	}
	f := &fakeDiscover{err: errors.New("backends.kubernetes.kubeconfig: unreadable")}
	if _, err := New(Options{Config: kubeConfig(), Discover: f.start}); err == nil || !strings.Contains(err.Error(), "kubeconfig") {
		t.Fatalf("New with a failing Discover: %v", err)
	}
}

func TestStaticOrigin(t *testing.T) {
	p, err := New(Options{Config: testConfig("http://127.0.0.1:1")})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if got := p.DebugBackends()[0].Origin; got != "static" {
		t.Fatalf("origin %q", got)
	}
}
