package route

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/internal/vllmsim"
	"github.com/probegate/probegate/probe"
)

// podReports drives a simulated vLLM engine (virtual time, slowed down by
// slowdown) through 12 s of other clients' traffic, a 2,000-token prompt
// every 150 ms, and returns what a scrape every 100 ms would report:
// idle gauges at the end and the prefill counters as /metrics exposes them.
func podReports(t *testing.T, slowdown float64) []probe.Load {
	t.Helper()
	e, err := vllmsim.NewEngine(vllmsim.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	e.SetSlowdown(slowdown)
	var out []probe.Load
	next, nextReport := time.Duration(0), time.Duration(0)
	for i := 0; e.Now() < 15*time.Second; {
		for next <= e.Now() && next < 12*time.Second {
			r := &vllmsim.Request{Prompt: vllmsim.HashText(16, "", "", fmt.Sprintf("client request %d ", i)+string(make([]byte, 8000))), MaxTokens: 4, IgnoreEOS: true}
			if err := e.Add(r); err != nil {
				t.Fatal(err)
			}
			i++
			next += 150 * time.Millisecond
		}
		if e.Idle() {
			to := 15 * time.Second
			if next < 12*time.Second {
				to = next
			}
			e.AdvanceTo(to)
		} else {
			e.Step()
		}
		for nextReport <= e.Now() {
			secs, toks := e.PrefillTotals()
			st := e.State()
			out = append(out, probe.Load{Running: st.Running, Waiting: st.Waiting, KVUse: st.KVUse, ServerLoad: -1,
				PrefillSeconds: secs, PrefillTokens: toks, At: pickT0.Add(-20 * time.Second).Add(nextReport), Source: probe.SourceScrape})
			nextReport += 100 * time.Millisecond
		}
	}
	return out
}

// TestTwoProxiesWithDisjointDispatchSeeTheSlowPod: two proxies in front of
// the same two pods, one twice as slow, each of which has only ever sent
// requests to one of them (so each learned the speed of one pod only),
// both scraping both. Both must see the slow pod as slow and send a
// request to the fast one when the two are otherwise equal. With the
// learned speed alone (route.load.pod_speed 0) neither can tell: each
// scores the pod it never timed at the mean of the ones it did, a tie.
func TestTwoProxiesWithDisjointDispatchSeeTheSlowPod(t *testing.T) {
	reports := [2][]probe.Load{podReports(t, 1), podReports(t, 2)}
	for _, podSpeed := range []float64{0.5, 1, 0} {
		for proxy := range 2 {
			pool, bs := testPool(2)
			for i, b := range bs {
				for j := range reports[i] {
					b.State().Report(&reports[i][j])
				}
			}
			// This proxy's own requests all went to pod `proxy`: 16
			// samples of that pod's true pace (the learned median).
			own := bs[proxy].State()
			ns := own.PodNsPerToken()
			if podSpeed == 1 && proxy == 0 {
				slow := bs[1].State().PodNsPerToken()
				// About 2: the slow pod is backlogged (its window is all
				// busy, decode steps included), the fast one is not (its
				// busy time is its prefills alone).
				if r := slow / ns; r < 1.8 || r > 2.5 {
					t.Fatalf("pod-reported speeds %.0f and %.0f ns a token: ratio %.2f, want about 2", ns, slow, r)
				}
			}
			for range 16 {
				own.AddWork(2000, 0)
				own.PrefillDone(2000, time.Duration(ns*2000), 2000)
			}
			for _, pol := range []string{config.PolicyCached, config.PolicyProbe} {
				pc := testPickerConfig(pol)
				pc.Load.PodSpeed = podSpeed
				// The learned speed alone: not the fresh pods'
				// window speeds either (route.load.pod_speed_fresh,
				// TestReplicaKnowsFreshSlowPodFromItsCounters).
				pc.Load.PodFresh = false
				pk := mustPicker(t, pc, pool, Deps{Memory: &Memory{}, Rand: seeded(uint64(proxy) + 3), Now: pickNow})
				fast := picksTo(t, pk, 2000, bs[0])
				switch {
				case podSpeed > 0 && fast != 200:
					t.Errorf("pod_speed %v, proxy that sent only to pod %d, %s: %d of 200 picks to the fast pod, want all", podSpeed, proxy, pol, fast)
				case podSpeed == 0 && (fast < 60 || fast > 140):
					t.Errorf("learned speed alone, proxy that sent only to pod %d, %s: %d of 200 picks to the fast pod, want a coin toss", proxy, pol, fast)
				}
			}
		}
	}
}

func TestLoadModelNsBlendsPodAndLearned(t *testing.T) {
	cases := []struct {
		podSpeed, learned, pod, want float64
	}{
		{0.5, 100, 300, 200},
		{0.25, 100, 300, 150},
		{1, 100, 300, 300},
		{0, 100, 300, 100},
		{0.5, 0, 300, 300}, // only the pod's known
		{0.5, 100, 0, 100}, // only the learned one
		{0, 0, 300, 0},     // off: the pod's is never used
		{0.5, 0, 0, 0},
	}
	for _, tc := range cases {
		m := LoadModel{Tokens: true, PodSpeed: tc.podSpeed}
		if got := m.Ns(tc.learned, tc.pod, 16, false); got != tc.want {
			t.Errorf("pod_speed %v, learned %v, pod %v: %v, want %v", tc.podSpeed, tc.learned, tc.pod, got, tc.want)
		}
	}
	m := LoadModel{Tokens: true, PodSpeed: 1}
	views := []probe.View{{NsPerToken: 100}, {NsPerToken: 100, PodNsPerToken: 300}, {}}
	if got := m.RefNs(views); got != 200 {
		t.Errorf("RefNs %v, want 200 (the mean of 100 and 300; the unknown one left out)", got)
	}
}

func TestLoadModelNsPodSamplesYieldToOwnTimings(t *testing.T) {
	cases := []struct {
		podSpeed, samples float64
		n                 int
		want              float64
	}{
		{0, 8, 0, 300},     // nothing timed yet: the pod's alone
		{0, 8, 8, 200},     // as many own samples as pod_speed_samples: half and half
		{0, 8, 24, 150},    // 8/32 of the pod's
		{0, 8, 792, 102},   // 1% of the pod's
		{0.5, 8, 792, 200}, // pod_speed is the floor of the pod's weight
		{0, 0, 0, 100},     // off (and pod_speed 0): learned only
	}
	for _, tc := range cases {
		m := LoadModel{Tokens: true, PodSpeed: tc.podSpeed, PodSamples: tc.samples}
		if got := m.Ns(100, 300, tc.n, true); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("pod_speed %v, pod_speed_samples %v, %d own samples: %v, want %v", tc.podSpeed, tc.samples, tc.n, got, tc.want)
		}
	}
	m := LoadModel{Tokens: true, PodSamples: 8}
	if got := m.Ns(0, 300, 0, true); got != 300 {
		t.Errorf("nothing learned: %v, want the pod's 300", got)
	}
	if got := m.Ns(100, 0, 0, true); got != 100 {
		t.Errorf("no pod-reported speed: %v, want the learned 100", got)
	}
	// A pod that was fresh when this proxy first read it (its speed from
	// windows, not seeded): pod_speed_samples leaves it alone.
	if got := m.Ns(100, 300, 0, false); got != 100 {
		t.Errorf("unseeded pod speed with pod_speed_samples 8 and pod_speed 0: %v, want the learned 100", got)
	}
	if got := m.Ns(0, 300, 0, false); got != 0 {
		t.Errorf("unseeded pod speed, nothing learned: %v, want unknown (0)", got)
	}
}

// lifetimeReport is the first scrape of a long-lived, idle pod twice as
// slow as the other when slowdown is 2: the prefill counters of an earlier
// life (3,000-token prompts every 400 ms for 60 s, played through a
// simulated engine) and idle gauges.
func lifetimeReport(t *testing.T, slowdown float64) probe.Load {
	t.Helper()
	var reqs []vllmsim.HistoryRequest
	for i := range 150 {
		reqs = append(reqs, vllmsim.HistoryRequest{At: time.Duration(i) * 400 * time.Millisecond,
			Prompt: vllmsim.Prompt{Tokens: 3000}, MaxTokens: 8})
	}
	st, err := vllmsim.RunHistory(vllmsim.DefaultConfig(), slowdown, reqs)
	if err != nil {
		t.Fatal(err)
	}
	return probe.Load{Running: 0, Waiting: 0, KVUse: 0, ServerLoad: -1, At: pickT0.Add(-time.Second), Source: probe.SourceScrape,
		PrefillSeconds: st.PrefillTime.Sum, PrefillTokens: st.PrefillComputed.Sum}
}

// TestJustStartedProxyKnowsLongLivedSlowPod: a proxy that has just started
// (it has timed no request) in front of two long-lived pods, one twice as
// slow. Its first scrape carries each pod's lifetime prefill counters;
// with route.load.pod_speed_samples it scores the slow pod as slow at once
// and sends a large prompt to the fast one every time, when the pods'
// reports show other clients' requests (route.load.pod_speed_foreign) or
// with the gate off. A lone proxy (the pods hold none but its requests)
// scores with its own timings alone, as with the seed off: both pods
// unknown, the same, a coin toss.
func TestJustStartedProxyKnowsLongLivedSlowPod(t *testing.T) {
	reports := [2]probe.Load{lifetimeReport(t, 1), lifetimeReport(t, 2)}
	cases := []struct {
		samples, foreign float64
		others           bool // the pods' later reports show other clients' requests
		seed             bool // want the seed: every pick to the fast pod
	}{
		{8, 0, false, true},                                  // no gate: the seed always
		{8, 0, true, true},                                   //
		{8, config.DefaultPodSpeedForeign, true, true},       // other clients: the seed
		{8, config.DefaultPodSpeedForeign, false, false},     // a lone proxy: its own timings
		{0, config.DefaultPodSpeedForeign, true, false},      // seed off
		{16, config.DefaultPodSpeedForeign, true, true},      //
		{8, 0.9, true, false},                                // a share of 1 - 0.8^4 is below 0.9
		{8, config.DefaultPodSpeedForeign / 2, false, false}, //
	}
	for _, tc := range cases {
		pool, bs := testPool(2)
		for i, b := range bs {
			b.State().Report(&reports[i])
			// Four scrapes 50 ms apart: the pod runs 3 requests, none of
			// them this proxy's (others), or is idle.
			for k := range 4 {
				running := 0
				if tc.others {
					running = 3
				}
				l := probe.Load{Running: running, Waiting: 0, KVUse: 0.1, ServerLoad: -1, At: reports[i].At.Add(time.Duration(k+1) * 50 * time.Millisecond), Source: probe.SourceScrape,
					PrefillSeconds: reports[i].PrefillSeconds, PrefillTokens: reports[i].PrefillTokens}
				b.State().Report(&l)
			}
		}
		fast, slow := bs[0].State().PodNsPerToken(), bs[1].State().PodNsPerToken()
		if r := slow / fast; !(r >= 1.8 && r <= 2.2) {
			t.Fatalf("lifetime speeds %.0f and %.0f ns a token: ratio %.2f, want about 2", fast, slow, r)
		}
		for _, pol := range []string{config.PolicyCached, config.PolicyProbe} {
			pc := testPickerConfig(pol)
			pc.Load.PodSamples, pc.Load.PodForeign = tc.samples, tc.foreign
			pk := mustPicker(t, pc, pool, Deps{Memory: &Memory{}, Rand: seeded(7), Now: pickNow})
			fast := picksTo(t, pk, 3000, bs[0])
			switch {
			case tc.seed && fast != 200:
				t.Errorf("pod_speed_samples %v, pod_speed_foreign %v, other clients %v, %s: %d of 200 picks to the fast pod, want all", tc.samples, tc.foreign, tc.others, pol, fast)
			case !tc.seed && (fast < 60 || fast > 140):
				t.Errorf("pod_speed_samples %v, pod_speed_foreign %v, other clients %v, %s: %d of 200 picks to the fast pod, want a coin toss", tc.samples, tc.foreign, tc.others, pol, fast)
			}
		}
	}
}

// TestReplicaKnowsFreshSlowPodFromItsCounters: a proxy among others (the
// pods' reports show other clients' requests) in front of two pods that
// started with it (fresh: their first scrape held no prefill counters, so
// nothing is seeded), one twice as slow, which it has not timed itself.
// Its scrapes over 15 s give each pod's speed from windows of its
// counters; with route.load.pod_speed_fresh (and pod_speed 0) the
// pod_speed_samples weight applies to those speeds too, so it sends a
// large prompt to the fast pod every time. Without it, as without the
// gate's other clients, the two pods are both unknown: a coin toss.
func TestReplicaKnowsFreshSlowPodFromItsCounters(t *testing.T) {
	reports := [2][]probe.Load{podReports(t, 1), podReports(t, 2)}
	cases := []struct {
		fresh bool
		gate  float64
		want  bool // every pick to the fast pod
	}{
		{true, config.DefaultPodSpeedForeign, true},
		{false, config.DefaultPodSpeedForeign, false},
		{true, 1.01, false}, // the gate shut (a lone proxy): its own timings alone
	}
	for _, tc := range cases {
		pool, bs := testPool(2)
		for i, b := range bs {
			for j := range reports[i] {
				b.State().Report(&reports[i][j])
			}
			if b.State().Latest() == nil || b.State().PodNsPerToken() <= 0 {
				t.Fatalf("pod %d: no pod-reported speed after 15 s of reports", i)
			}
		}
		if v := bs[1].State().View(pickNow(), time.Hour); v.PodSeeded || v.ForeignShare < config.DefaultPodSpeedForeign {
			t.Fatalf("slow pod's view: seeded %v, foreign share %.2f; want a fresh pod with other clients", v.PodSeeded, v.ForeignShare)
		}
		for _, pol := range []string{config.PolicyCached, config.PolicyProbe} {
			pc := testPickerConfig(pol)
			pc.Load.PodSpeed, pc.Load.PodSamples, pc.Load.PodForeign, pc.Load.PodFresh = 0, config.DefaultPodSpeedSamples, tc.gate, tc.fresh
			pk := mustPicker(t, pc, pool, Deps{Memory: &Memory{}, Rand: seeded(11), Now: pickNow})
			fast := picksTo(t, pk, 3000, bs[0])
			switch {
			case tc.want && fast != 200:
				t.Errorf("pod_speed_fresh %v, gate %v, %s: %d of 200 picks to the fast pod, want all", tc.fresh, tc.gate, pol, fast)
			case !tc.want && (fast < 60 || fast > 140):
				t.Errorf("pod_speed_fresh %v, gate %v, %s: %d of 200 picks to the fast pod, want a coin toss", tc.fresh, tc.gate, pol, fast)
			}
		}
	}
}

// picksTo returns how many of 200 picks of pk for a prompt of prompt
// tokens go to b.
func picksTo(t *testing.T, pk Picker, prompt int, b *Backend) int {
	t.Helper()
	s := NewScratch()
	n := 0
	for range 200 {
		got, _, err := pk.Pick(context.Background(), &RequestInfo{PromptTokens: prompt}, nil, s)
		if err != nil {
			t.Fatal(err)
		}
		if got == b {
			n++
		}
	}
	return n
}
