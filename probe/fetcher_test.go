package probe

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeVLLM serves vLLM-like /metrics and /load on loopback, plus a few
// misbehaving paths selected with the mode.
type fakeVLLM struct {
	srv   *httptest.Server
	mu    sync.Mutex
	mode  string // "", "slow", "500", "huge"
	delay time.Duration
	body  []byte
}

func newFakeVLLM(t *testing.T) *fakeVLLM {
	t.Helper()
	f := &fakeVLLM{body: vllmMetrics(1, []int{5}, []int{2}, []float64{0.3})}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeVLLM) set(mode string, delay time.Duration) {
	f.mu.Lock()
	f.mode, f.delay = mode, delay
	f.mu.Unlock()
}

func (f *fakeVLLM) addr() string { return strings.TrimPrefix(f.srv.URL, "http://") }

func (f *fakeVLLM) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	mode, delay := f.mode, f.delay
	f.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	switch mode {
	case "500":
		http.Error(w, "boom", http.StatusInternalServerError)
		return
	case "huge":
		w.Write(make([]byte, MaxMetricsBytes+1))
		return
	}
	switch r.URL.Path {
	case "/metrics":
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		w.Write(f.body)
	case "/load":
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"server_load": 9}`))
	default:
		http.NotFound(w, r)
	}
}

func TestParseEndpoint(t *testing.T) {
	for in, want := range map[string]Endpoint{"": EndpointMetrics, "metrics": EndpointMetrics, "load": EndpointLoad, "/load": EndpointLoad} {
		got, err := ParseEndpoint(in)
		if err != nil || got != want {
			t.Errorf("ParseEndpoint(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseEndpoint("health"); err == nil {
		t.Error("ParseEndpoint(health) succeeded")
	}
	if EndpointLoad.Path() != "/load" || EndpointMetrics.Path() != "/metrics" || EndpointLoad.String() != "load" {
		t.Error("Path/String")
	}
}

func TestHTTPFetcher(t *testing.T) {
	srv := newFakeVLLM(t)
	f := &HTTPFetcher{}
	s := NewState(srv.addr())
	t.Cleanup(func() { f.Forget(s) })
	ctx := context.Background()

	t.Run("metrics", func(t *testing.T) {
		srv.set("", 0)
		before := time.Now()
		l, err := f.Fetch(ctx, s, EndpointMetrics)
		if err != nil {
			t.Fatal(err)
		}
		if l.Running != 5 || l.Waiting != 2 || l.KVUse != 0.3 || l.At.Before(before) {
			t.Errorf("got %+v", l)
		}
	})
	t.Run("load", func(t *testing.T) {
		srv.set("", 0)
		l, err := f.Fetch(ctx, s, EndpointLoad)
		if err != nil || l.ServerLoad != 9 {
			t.Fatalf("got %+v, %v", l, err)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		// The answer is 5 s away (the server stops waiting when the
		// fetch gives up). The fetch ends at the ctx deadline, 20 ms; the
		// bound is the fetch's own timeout without one, the only other
		// wait it has: a wall-clock bound of 200 ms failed at 208 ms on
		// a loaded machine.
		srv.set("slow", 5*time.Second)
		ctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := f.Fetch(ctx, s, EndpointLoad)
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("err = %v, want ErrTimeout", err)
		}
		if el := time.Since(start); el >= DefaultFetchTimeout {
			t.Errorf("timeout took %v, want the ctx deadline (20 ms), not DefaultFetchTimeout (%v)", el, DefaultFetchTimeout)
		}
	})
	t.Run("expired ctx", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, -time.Second)
		defer cancel()
		if _, err := f.Fetch(ctx, s, EndpointLoad); !errors.Is(err, ErrTimeout) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("status", func(t *testing.T) {
		srv.set("500", 0)
		if _, err := f.Fetch(ctx, s, EndpointMetrics); !errors.Is(err, ErrStatus) {
			t.Fatalf("err = %v, want ErrStatus", err)
		}
	})
	t.Run("too large", func(t *testing.T) {
		srv.set("huge", 0)
		_, err := f.Fetch(ctx, s, EndpointMetrics)
		if err == nil || errors.Is(err, ErrTimeout) {
			t.Fatalf("err = %v, want a size error", err)
		}
	})
	t.Run("refused", func(t *testing.T) {
		dead := NewState("127.0.0.1:1")
		_, err := f.Fetch(ctx, dead, EndpointLoad)
		if err == nil || errors.Is(err, ErrTimeout) {
			t.Fatalf("err = %v", err)
		}
	})
}

// TestHTTPFetcherLazyClient: concurrent first fetches share one HostClient.
func TestHTTPFetcherLazyClient(t *testing.T) {
	srv := newFakeVLLM(t)
	f := &HTTPFetcher{MaxIdleConnDuration: time.Second}
	s := NewState(srv.addr())
	t.Cleanup(func() { f.Forget(s) })
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := f.Fetch(context.Background(), s, EndpointLoad); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	v, ok := f.clients.Load(s)
	if !ok {
		t.Fatal("no client kept for the backend")
	}
	c := v.(*hostClient)
	if c.MaxIdleConnDuration != time.Second || c.Addr != srv.addr() {
		t.Fatalf("client %+v", c)
	}
	if f.hostClient(s) != c.HostClient {
		t.Fatal("client replaced")
	}
	// Forget drops it: the next fetch builds a new one.
	f.Forget(s)
	if _, ok := f.clients.Load(s); ok {
		t.Fatal("Forget kept the client")
	}
	if _, err := f.Fetch(context.Background(), s, EndpointLoad); err != nil {
		t.Fatal(err)
	}
	if f.hostClient(s) == c.HostClient {
		t.Fatal("a forgotten client was reused")
	}
}
