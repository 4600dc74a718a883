package route

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/internal/vllmsim"
	"github.com/probegate/probegate/probe"
)

// TestAutoDProbesPerRequest: with route.d and probe.quorum at their auto
// defaults, a proxy in front of 8 real servers probes 2 of them per request
// and one in front of config.LargePool servers probes config.LargePoolD,
// counted as the probes it sent over its sockets (no hedges, nothing
// fresh, so each request probes exactly its sampled candidates). An
// explicit route.d is kept whatever the pool's size, with the quorum it had
// before the rule. /debug/config shows what is in effect.
func TestAutoDProbesPerRequest(t *testing.T) {
	if config.LargePoolD <= config.SmallPoolD {
		t.Fatalf("the rule samples %d candidates in large pools, %d in small ones: nothing to tell apart", config.LargePoolD, config.SmallPoolD)
	}
	for _, c := range []struct {
		name         string
		servers, d   int
		wantD, wantQ int
		configured   string
	}{
		{"auto, 8 servers", 8, config.DAuto, config.SmallPoolD, config.SmallPoolD, "auto"},
		{"auto, large pool", config.LargePool, config.DAuto, config.LargePoolD, config.LargePoolD, "auto"},
		{"explicit d=3, large pool", config.LargePool, 3, 3, 2, "3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := simFleet(t, c.servers, nil)
			cfg := probeConfig(f)
			cfg.Route.D = c.d
			cfg.Probe.Hedges = 0
			cfg.Probe.FreshFor = 0
			cfg.Probe.Deadline = config.Duration(2e9) // every probe answers
			tp := startProxy(t, cfg)

			const reqs = 12
			for range reqs {
				complete(t, tp.url("/v1/completions"), vllmsim.DefaultConfig().Model, 1, false)
			}
			// Each candidate is probed or, when a probe to it is still in
			// flight (a quorum below d leaves the slowest one behind), waits
			// for that probe (coalesced). A probe left behind is counted when
			// it ends: wait for the last ones.
			wantProbed := float64(reqs * c.wantD)
			var probed float64
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				probed = 0
				for _, o := range []string{probe.OutcomeOK, probe.OutcomeTimeout, probe.OutcomeError, probe.OutcomeCancelled, probe.OutcomeCoalesced} {
					probed += tp.counter(t, "probegate_probes_total", map[string]string{"outcome": o})
				}
				if probed >= wantProbed || time.Now().After(deadline) {
					break
				}
			}
			if probed != wantProbed {
				t.Fatalf("%d requests probed %.0f candidates, want %.0f (d = %d per request)", reqs, probed, wantProbed, c.wantD)
			}

			srv := httptest.NewServer(tp.AdminHandler())
			defer srv.Close()
			resp, err := http.Get(srv.URL + "/debug/config")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var got ConfigInfo
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
				t.Fatal(err)
			}
			want := ConfigInfo{Policy: config.PolicyProbe, Backends: c.servers, D: c.wantD, Quorum: c.wantQ, Hedges: 0, DConfigured: c.configured, QuorumConfigured: "auto"}
			if got != want {
				t.Fatalf("/debug/config = %+v, want %+v", got, want)
			}
			if pr := tp.snap.Load().set.prober.(*probe.Prober); pr.Config().Quorum != c.wantQ {
				t.Fatalf("the prober waits for %d answers, want %d", pr.Config().Quorum, c.wantQ)
			}
		})
	}
}

// TestAutoDFollowsThePool: the d of route.d auto is chosen when a pool is
// published: growing a pool past config.LargePool widens the sample of the
// next picker, shrinking it narrows it again, and a reload to an explicit
// route.d takes that value at once.
func TestAutoDFollowsThePool(t *testing.T) {
	urls := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = "http://127.0.0.2:" + strconv.Itoa(10000+i)
		}
		return out
	}
	cfg := config.Default()
	cfg.Backends.Static = urls(8)
	cfg.Log.Access = false
	// Views that need no reports: the proxy scrapes nothing, so the
	// unreachable addresses stay eligible.
	var logs syncBuffer
	p, err := New(Options{Config: cfg, Views: fixedViews{}, Logger: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	// probes runs one Pick of the published picker with a counting prober
	// in place of the real one and returns how many candidates it was
	// handed.
	probes := func() int {
		t.Helper()
		snap := p.snap.Load()
		pp, ok := snap.picker.(*probePicker)
		if !ok {
			t.Fatalf("picker %T, want the probe policy's", snap.picker)
		}
		fp := &fakeProber{loads: map[string]int{}}
		counting := *pp
		counting.prober = fp
		if _, _, err := counting.Pick(context.Background(), &RequestInfo{}, nil, NewScratch()); err != nil {
			t.Fatal(err)
		}
		return len(fp.cands)
	}
	reload := func(c *config.Config) {
		t.Helper()
		if err := p.Reload(c); err != nil {
			t.Fatal(err)
		}
	}
	if got := probes(); got != config.SmallPoolD {
		t.Fatalf("8 backends: %d candidates, want %d", got, config.SmallPoolD)
	}
	big := *cfg
	big.Backends.Static = urls(config.LargePool)
	reload(&big)
	if got := probes(); got != config.LargePoolD {
		t.Fatalf("%d backends: %d candidates, want %d", config.LargePool, got, config.LargePoolD)
	}
	if q := p.DebugConfig().Quorum; q != config.LargePoolD {
		t.Fatalf("%d backends: quorum %d, want %d", config.LargePool, q, config.LargePoolD)
	}
	fixed := big
	fixed.Route.D = 3
	reload(&fixed)
	if got, q := probes(), p.DebugConfig().Quorum; got != 3 || q != 2 {
		t.Fatalf("route.d 3: %d candidates, quorum %d; want 3, 2", got, q)
	}
	small := *cfg
	small.Backends.Static = urls(config.LargePool - 1)
	reload(&small)
	if got := probes(); got != config.SmallPoolD {
		t.Fatalf("%d backends: %d candidates, want %d", config.LargePool-1, got, config.SmallPoolD)
	}
	reload(&small) // same size: no change, no log line
	// route.d auto logged each change of d the pool caused once: up at
	// LargePool backends and down at LargePool-1 (the explicit route.d 3
	// in between is not auto).
	if n := logs.count("route.d auto"); n != 2 {
		t.Fatalf("route.d auto logged %d times, want 2 (up at %d backends, down at %d)", n, config.LargePool, config.LargePool-1)
	}
}
