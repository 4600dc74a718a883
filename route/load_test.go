package route

import (
	"math"
	"testing"
	"time"

	"github.com/probegate/probegate/probe"
)

func TestLoadModelQueue(t *testing.T) {
	tokens := LoadModel{Tokens: true, DecodeWeight: 0.5}
	in := LoadInput{Own: 1000, MeanPrompt: 1000, RefNs: 100}
	cases := []struct {
		name string
		m    LoadModel
		v    probe.View
		in   LoadInput
		want float64
	}{
		{"requests mode is the view's queue", LoadModel{}, probe.View{Queue: 3, PrefillTokens: 9000}, in, 3},
		{"idle backend: own prefill only", tokens, probe.View{Source: probe.SourceLocal}, in, 1},
		{"local prefill ahead counts", tokens, probe.View{Source: probe.SourceLocal, PrefillTokens: 3000}, in, 4},
		{"decode in flight at decode_weight", tokens, probe.View{Source: probe.SourceLocal, DecodeTokens: 2000}, in, 2},
		{"reported waiting beyond what this proxy sent", tokens, probe.View{Source: probe.SourceProbe, Waiting: 5, PrefillTokens: 2000}, in, 6},
		{"local prediction beyond a stale-low report", tokens, probe.View{Source: probe.SourceScrape, Waiting: 1, PrefillTokens: 4000}, in, 5},
		{"waiting of a local-only view is not a report", tokens, probe.View{Source: probe.SourceLocal, Waiting: 5}, in, 1},
		{"a backend learned 2x slower costs 2x", tokens, probe.View{Source: probe.SourceLocal, PrefillTokens: 1000, NsPerToken: 200}, in, 4},
		{"cached prefix shrinks own prefill", tokens, probe.View{Source: probe.SourceLocal}, LoadInput{Own: 250, MeanPrompt: 1000, RefNs: 100}, 0.25},
		{"running requests count as requests", LoadModel{Tokens: true, RunningWeight: 1}, probe.View{Source: probe.SourceProbe, Queue: 3, Waiting: 1}, in, 2 + 2},
		{"local requests past prefill are running", LoadModel{Tokens: true, RunningWeight: 0.5}, probe.View{Source: probe.SourceLocal, Queue: 3, PrefillRequests: 1, PrefillTokens: 1000}, in, 0.5*2 + 2},
		{"no mean prompt yet: requests", tokens, probe.View{Queue: 2}, LoadInput{Own: 10, RefNs: 1}, 2},
		{"waiting_weight: a request not past its prefill counts too", LoadModel{Tokens: true, RunningWeight: 1, WaitingWeight: 1}, probe.View{Source: probe.SourceProbe, Queue: 3, Waiting: 1}, in, 2 + 1 + 2},
		{"waiting_weight: this proxy's requests in prefill", LoadModel{Tokens: true, RunningWeight: 1, WaitingWeight: 0.5}, probe.View{Source: probe.SourceLocal, Queue: 3, PrefillRequests: 2, PrefillTokens: 1000}, in, 1 + 0.5*2 + 2},
		{"requests mode, speed_band: 2x slower counts its queue and the request twice", LoadModel{SpeedBand: 1.25}, probe.View{Queue: 1, NsPerToken: 200}, in, (1+1)*2 - 1},
		{"requests mode, speed_band: 2x faster counts them half", LoadModel{SpeedBand: 1.25}, probe.View{Queue: 3, NsPerToken: 50}, in, (3+1)*0.5 - 1},
		{"requests mode, speed_band: within the band, the count", LoadModel{SpeedBand: 1.25}, probe.View{Queue: 1, NsPerToken: 120}, in, 1},
		{"requests mode, speed_band: within the band below, the count", LoadModel{SpeedBand: 1.25}, probe.View{Queue: 1, NsPerToken: 81}, in, 1},
		{"requests mode, speed_band 0: the count", LoadModel{}, probe.View{Queue: 1, NsPerToken: 200}, in, 1},
		{"requests mode, learn_speed off: the count", LoadModel{SpeedBand: 1.25, IgnoreSpeed: true}, probe.View{Queue: 1, NsPerToken: 200}, in, 1},
		{"requests mode, speed not learned: the count", LoadModel{SpeedBand: 1.25}, probe.View{Queue: 2}, in, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.m.Queue(&c.v, &c.in); math.Abs(got-c.want) > 1e-9 {
				t.Fatalf("Queue = %v, want %v", got, c.want)
			}
		})
	}
}

// A short prompt queued behind a long one on one backend must lose to a
// backend with two short ones: request counts say the opposite.
func TestTokenQueueRanksByWorkNotCount(t *testing.T) {
	m := LoadModel{Tokens: true}
	in := LoadInput{Own: 100, MeanPrompt: 1500, RefNs: 1}
	long := probe.View{Queue: 1, Source: probe.SourceLocal, PrefillTokens: 7000}
	shorts := probe.View{Queue: 2, Source: probe.SourceLocal, PrefillTokens: 200}
	if m.Queue(&long, &in) <= m.Queue(&shorts, &in) {
		t.Fatalf("one 7000-token prompt ahead (%v) should outweigh two 100-token ones (%v)", m.Queue(&long, &in), m.Queue(&shorts, &in))
	}
}

// Short prompts queued for a batch seat: three requests of 100 prefill
// tokens each (their prefix cached) ahead on one backend, two running on
// another. Prefill work alone says the first is nearly idle; each of them
// waits for a seat, which waiting_weight counts.
func TestWaitingWeightCountsQueuedShortPrompts(t *testing.T) {
	in := LoadInput{Own: 100, MeanPrompt: 1000, RefNs: 1}
	queued := probe.View{Queue: 3, Source: probe.SourceLocal, PrefillRequests: 3, PrefillTokens: 300}
	running := probe.View{Queue: 2, Waiting: 0, Source: probe.SourceProbe}
	old := LoadModel{Tokens: true, RunningWeight: 1}
	if old.Queue(&queued, &in) >= old.Queue(&running, &in) {
		t.Fatalf("without waiting_weight the queued backend (%v) should look lighter than the running one (%v)", old.Queue(&queued, &in), old.Queue(&running, &in))
	}
	m := LoadModel{Tokens: true, RunningWeight: 1, WaitingWeight: 1}
	if m.Queue(&queued, &in) <= m.Queue(&running, &in) {
		t.Fatalf("waiting_weight 1: 3 queued requests (%v) should outweigh 2 running (%v)", m.Queue(&queued, &in), m.Queue(&running, &in))
	}
}

func TestRefNsAndOwnPrefill(t *testing.T) {
	var m LoadModel // pod_speed 0: the learned speeds alone
	if r := m.RefNs([]probe.View{{}, {NsPerToken: 100}, {NsPerToken: 300}}); r != 200 {
		t.Fatalf("RefNs = %v, want the mean of learned speeds 200", r)
	}
	if r := m.RefNs([]probe.View{{}, {}}); r != 1 {
		t.Fatalf("RefNs with none learned = %v, want 1", r)
	}
	if o := OwnPrefill(1000, 2, 256); o != 1000-2*64 {
		t.Fatalf("OwnPrefill = %v, want 872", o)
	}
	if o := OwnPrefill(100, 10, 256); o != 1 {
		t.Fatalf("OwnPrefill fully cached = %v, want 1", o)
	}
}

func TestOutputEstimator(t *testing.T) {
	var o outputEstimator
	if e := o.expected(7, 50, true, 128); e != 50 {
		t.Fatalf("ignore_eos: %v, want max_tokens 50", e)
	}
	if e := o.expected(7, 0, false, 128); e != 128 {
		t.Fatalf("no samples: %v, want the default 128", e)
	}
	if e := o.expected(7, 40, false, 128); e != 40 {
		t.Fatalf("default capped by max_tokens: %v, want 40", e)
	}
	for range 200 {
		o.observe(7, 20)
	}
	if e := o.expected(7, 0, false, 128); math.Abs(e-20) > 0.5 {
		t.Fatalf("after samples of 20: %v", e)
	}
	if e := o.expected(7+outputSlots, 0, false, 128); e != 128 {
		t.Fatalf("another model in the same slot must not inherit the estimate: %v", e)
	}
}

// The work ticket adds a request's tokens at dispatch, takes the prefill
// back at the first byte (learning the backend's speed) and the rest at
// the end, leaving the backend's counters at zero.
func TestWorkTicketLifecycle(t *testing.T) {
	p := &Proxy{}
	b := &Backend{state: probe.NewState("a:1")}
	rt := &settings{blockChars: 256, defaultOutput: 128}
	rc := newReqCtx()
	rc.info.PromptTokens, rc.info.MaxTokens, rc.info.IgnoreEOS, rc.info.Stream = 2000, 30, true, true
	t0 := time.Unix(100, 0)
	w := p.beginWork(rt, rc, b, t0)
	if pre, dec, _ := b.state.Work(); pre != 2000 || dec != 30 {
		t.Fatalf("after dispatch: prefill %v decode %v, want 2000 30", pre, dec)
	}
	w.sawBytes(b, []byte("data: {}\n\n"), t0.Add(200*time.Millisecond))
	pre, dec, ns := b.state.Work()
	if pre != 0 || dec != 30 {
		t.Fatalf("after first byte: prefill %v decode %v, want 0 30", pre, dec)
	}
	if want := float64(200*time.Millisecond) / 2000; math.Abs(ns-want) > 1e-6 {
		t.Fatalf("learned %v ns/token, want %v", ns, want)
	}
	w.sawBytes(b, []byte("data: {}\n\n"), t0.Add(300*time.Millisecond))
	p.endWork(b, &w, true)
	if pre, dec, _ := b.state.Work(); pre != 0 || dec != 0 {
		t.Fatalf("after end: prefill %v decode %v, want 0 0", pre, dec)
	}
	// A request that fails before any byte gives its whole prompt back.
	w = p.beginWork(rt, rc, b, t0)
	p.endWork(b, &w, false)
	if pre, dec, _ := b.state.Work(); pre != 0 || dec != 0 {
		t.Fatalf("after a failed request: prefill %v decode %v, want 0 0", pre, dec)
	}
	if m := p.memory.book.MeanPrompt(0); m != 2000 {
		t.Fatalf("mean prompt %v, want 2000", m)
	}
}

// A speed sample divides the wait by the work ahead. With several proxies
// (or direct clients) most of that work is not this proxy's: a fresh
// report's waiting requests count at the mean prompt, so the sample does
// not read other clients' queue as slowness. A stale report does not count.
func TestSpeedSampleCountsReportedWaiting(t *testing.T) {
	t0 := time.Unix(100, 0)
	for _, c := range []struct {
		name   string
		age    time.Duration
		wantNs float64
	}{
		{"fresh report: 3 waiting x 1000 + own 1000", 10 * time.Millisecond, float64(400*time.Millisecond) / 4000},
		{"stale report: own 1000 alone", 5 * time.Second, float64(400*time.Millisecond) / 1000},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := &Memory{}
			b := &Backend{state: probe.NewState("a:1")}
			l := probe.Load{Running: 4, Waiting: 3, KVUse: 0.5, ServerLoad: -1, At: t0.Add(-c.age), Source: probe.SourceProbe}
			b.state.Report(&l)
			info := RequestInfo{PromptTokens: 1000, MaxTokens: 10, IgnoreEOS: true, Stream: true}
			w := m.beginWork(&info, b, 256, 128, t0)
			w.sawBytes(b, []byte("data: {}\n\n"), t0.Add(400*time.Millisecond))
			if _, _, ns := b.state.Work(); math.Abs(ns-c.wantNs) > 1e-6 {
				t.Fatalf("learned %v ns/token, want %v", ns, c.wantNs)
			}
			m.endWork(b, &w, true)
		})
	}
}
