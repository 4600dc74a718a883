package probe

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/probegate/probegate/internal/config"
)

// fakeFetcher answers each backend after a per-address delay (in the
// synctest bubble's virtual time), honouring ctx unless deaf is set.
type fakeFetcher struct {
	mu     sync.Mutex
	delay  map[string]time.Duration // missing: answer at once
	fail   map[string]error         // answer with this error after the delay
	deaf   map[string]bool          // ignore ctx cancellation (like fasthttp)
	calls  []string
	ctxErr map[string]error // ctx.Err() seen when the fetch returned
	active atomic.Int32     // fetches in progress
}

func newFakeFetcher() *fakeFetcher {
	return &fakeFetcher{delay: map[string]time.Duration{}, fail: map[string]error{}, deaf: map[string]bool{}, ctxErr: map[string]error{}}
}

func (f *fakeFetcher) Fetch(ctx context.Context, s *State, ep Endpoint) (Load, error) {
	f.active.Add(1)
	defer f.active.Add(-1)
	f.mu.Lock()
	d, ferr, deaf := f.delay[s.Addr()], f.fail[s.Addr()], f.deaf[s.Addr()]
	f.calls = append(f.calls, s.Addr())
	f.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	var err error
	if deaf {
		<-t.C
	} else {
		select {
		case <-t.C:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	f.mu.Lock()
	f.ctxErr[s.Addr()] = ctx.Err()
	f.mu.Unlock()
	if err != nil {
		return Load{}, err
	}
	if ferr != nil {
		return Load{}, ferr
	}
	l := Unknown(time.Now(), SourceNone)
	l.Running, l.Waiting = 1, int(d/time.Millisecond)
	return l, nil
}

func (f *fakeFetcher) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *fakeFetcher) seenCtxErr(addr string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ctxErr[addr]
}

// countObserver counts outcomes.
type countObserver struct {
	mu       sync.Mutex
	probes   map[string]int
	scrapes  map[string]int
	interval map[string][]time.Duration
}

func newCountObserver() *countObserver {
	return &countObserver{probes: map[string]int{}, scrapes: map[string]int{}, interval: map[string][]time.Duration{}}
}

func (o *countObserver) Probe(outcome string, _ time.Duration) {
	o.mu.Lock()
	o.probes[outcome]++
	o.mu.Unlock()
}

func (o *countObserver) Scrape(addr, outcome string) {
	o.mu.Lock()
	o.scrapes[outcome]++
	o.mu.Unlock()
}

func (o *countObserver) ScrapeInterval(addr string, d time.Duration) {
	o.mu.Lock()
	o.interval[addr] = append(o.interval[addr], d)
	o.mu.Unlock()
}

// probeCounts returns a copy of the counts of every probe outcome.
func (o *countObserver) probeCounts() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.probes)
}

func (o *countObserver) probe(outcome string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.probes[outcome]
}

func states(addrs ...string) []*State {
	out := make([]*State, len(addrs))
	for i, a := range addrs {
		out[i] = NewState(a)
	}
	return out
}

const ms = time.Millisecond

func TestProberRun(t *testing.T) {
	type tc struct {
		name      string
		cfg       ProberConfig
		cands     []string
		spares    []string
		delay     map[string]time.Duration
		fail      map[string]error
		fresh     []string // Reported 1ms before Run
		want      Result
		wantCalls []string // in any order
		cancelled []string // fetches that must see their ctx cancelled
	}
	hour := time.Hour
	tests := []tc{
		{
			name:      "probe that never answers costs exactly the deadline",
			cfg:       ProberConfig{Deadline: 5 * ms, HedgeAfter: hour, Quorum: 1},
			cands:     []string{"a"},
			delay:     map[string]time.Duration{"a": hour},
			want:      Result{Probed: 1, TimedOut: 1, Waited: 5 * ms},
			wantCalls: []string{"a"},
			cancelled: []string{"a"},
		},
		{
			name:      "quorum returns at the quorum-th answer",
			cfg:       ProberConfig{Deadline: 5 * ms, HedgeAfter: hour, Quorum: 2},
			cands:     []string{"a", "b", "c"},
			delay:     map[string]time.Duration{"a": 1 * ms, "b": 2 * ms, "c": 4 * ms},
			want:      Result{Probed: 3, Answered: 2, Cancelled: 1, Waited: 2 * ms},
			wantCalls: []string{"a", "b", "c"},
			cancelled: []string{"c"},
		},
		{
			name:      "default quorum is d-1",
			cfg:       ProberConfig{Deadline: 5 * ms, HedgeAfter: hour},
			cands:     []string{"a", "b"},
			delay:     map[string]time.Duration{"a": 3 * ms, "b": 1 * ms},
			want:      Result{Probed: 2, Answered: 1, Cancelled: 1, Waited: 1 * ms},
			wantCalls: []string{"a", "b"},
			cancelled: []string{"a"},
		},
		{
			name:   "hedge fires at HedgeAfter and a fast hedge completes the quorum",
			cfg:    ProberConfig{Deadline: 5 * ms, HedgeAfter: 1 * ms, Hedges: 1, Quorum: 1},
			cands:  []string{"a", "b"},
			spares: []string{"s1", "s2"},
			delay:  map[string]time.Duration{"a": hour, "b": hour, "s1": ms / 2},
			want: Result{Probed: 3, Answered: 1, Hedged: 1, Cancelled: 2, SparesUsed: 1,
				Waited: 1*ms + ms/2},
			wantCalls: []string{"a", "b", "s1"},
			cancelled: []string{"a", "b"},
		},
		{
			name:   "hedge skips fresh spares and counts them",
			cfg:    ProberConfig{Deadline: 5 * ms, HedgeAfter: 1 * ms, Hedges: 1, Quorum: 2, FreshFor: 2 * ms},
			cands:  []string{"a", "b"},
			spares: []string{"s1", "s2"},
			fresh:  []string{"s1"},
			delay:  map[string]time.Duration{"a": hour, "b": 3 * ms, "s2": ms},
			// The fresh spare counts toward the quorum: s2's answer at 2ms completes it.
			want: Result{Probed: 3, Answered: 1, Hedged: 1, SkippedFresh: 1, SparesUsed: 2, Cancelled: 2,
				Waited: 2 * ms},
			wantCalls: []string{"a", "b", "s2"},
			cancelled: []string{"a", "b"},
		},
		{
			name:      "all probes missing: deadline, nothing answered",
			cfg:       ProberConfig{Deadline: 5 * ms, HedgeAfter: 1 * ms, Hedges: 1},
			cands:     []string{"a", "b"},
			spares:    []string{"s"},
			delay:     map[string]time.Duration{"a": hour, "b": hour, "s": hour},
			want:      Result{Probed: 3, Hedged: 1, TimedOut: 3, SparesUsed: 1, Waited: 5 * ms},
			wantCalls: []string{"a", "b", "s"},
			cancelled: []string{"a", "b", "s"},
		},
		{
			name:      "fresh candidates are skipped without a fetch",
			cfg:       ProberConfig{Deadline: 5 * ms, HedgeAfter: 1 * ms, Hedges: 1, Quorum: 2, FreshFor: 2 * ms},
			cands:     []string{"a", "b", "c"},
			fresh:     []string{"a", "c"},
			want:      Result{SkippedFresh: 2},
			wantCalls: nil,
		},
		{
			name:      "one fresh, one probed",
			cfg:       ProberConfig{Deadline: 5 * ms, HedgeAfter: hour, Quorum: 2, FreshFor: 2 * ms},
			cands:     []string{"a", "b"},
			fresh:     []string{"a"},
			delay:     map[string]time.Duration{"b": ms},
			want:      Result{Probed: 1, Answered: 1, SkippedFresh: 1, Waited: ms},
			wantCalls: []string{"b"},
		},
		{
			name:      "every probe fails: hedge at once, before HedgeAfter",
			cfg:       ProberConfig{Deadline: 5 * ms, HedgeAfter: 4 * ms, Hedges: 1, Quorum: 1},
			cands:     []string{"a", "b"},
			spares:    []string{"s"},
			fail:      map[string]error{"a": errors.New("refused"), "b": errors.New("refused")},
			delay:     map[string]time.Duration{"s": ms},
			want:      Result{Probed: 3, Answered: 1, Failed: 2, Hedged: 1, SparesUsed: 1, Waited: ms},
			wantCalls: []string{"a", "b", "s"},
		},
		{
			name:      "every probe fails and no spare: return at once",
			cfg:       ProberConfig{Deadline: 5 * ms, HedgeAfter: 1 * ms, Hedges: 1, Quorum: 1},
			cands:     []string{"a", "b"},
			fail:      map[string]error{"a": errors.New("refused"), "b": ErrTimeout},
			delay:     map[string]time.Duration{"b": ms / 2},
			want:      Result{Probed: 2, Failed: 1, TimedOut: 1, Waited: ms / 2},
			wantCalls: []string{"a", "b"},
		},
		{
			name: "no candidates and no spares: return at once",
			cfg:  ProberConfig{Deadline: 5 * ms, HedgeAfter: ms, Hedges: 1},
			want: Result{},
		},
		{
			name:      "no candidates: hedge to the spares at once",
			cfg:       ProberConfig{Deadline: 5 * ms, HedgeAfter: 4 * ms, Hedges: 1},
			spares:    []string{"s"},
			delay:     map[string]time.Duration{"s": ms},
			want:      Result{Probed: 1, Answered: 1, Hedged: 1, SparesUsed: 1, Waited: ms},
			wantCalls: []string{"s"},
		},
		{
			name:      "hedge after the deadline never fires",
			cfg:       ProberConfig{Deadline: 5 * ms, HedgeAfter: 5 * ms, Hedges: 1},
			cands:     []string{"a", "b"},
			spares:    []string{"s"},
			delay:     map[string]time.Duration{"a": hour, "b": hour},
			want:      Result{Probed: 2, TimedOut: 2, Waited: 5 * ms},
			wantCalls: []string{"a", "b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFakeFetcher()
				maps := func(dst map[string]time.Duration) {
					for k, v := range tt.delay {
						dst[k] = v
					}
				}
				maps(f.delay)
				for k, v := range tt.fail {
					f.fail[k] = v
				}
				cands, spares := states(tt.cands...), states(tt.spares...)
				for _, s := range append(slices.Clone(cands), spares...) {
					if slices.Contains(tt.fresh, s.Addr()) {
						l := Unknown(time.Now().Add(-ms), SourceScrape)
						l.Running, l.Waiting = 0, 0
						s.Report(&l)
					}
				}
				obs := newCountObserver()
				p := NewProber(tt.cfg, f, obs, nil)
				got := p.Run(context.Background(), cands, spares)
				if got != tt.want {
					t.Errorf("Run = %+v\nwant  %+v", got, tt.want)
				}
				// Without advancing virtual time, every losing probe has
				// seen its cancellation and returned.
				synctest.Wait()
				if n := f.active.Load(); n != 0 {
					t.Errorf("%d probes still running after the decision", n)
				}
				calls := f.called()
				slices.Sort(calls)
				if !slices.Equal(calls, tt.wantCalls) {
					t.Errorf("fetched %q, want %q", calls, tt.wantCalls)
				}
				for _, a := range tt.cancelled {
					if f.seenCtxErr(a) == nil {
						t.Errorf("probe of %s was not cancelled", a)
					}
				}
				if n := obs.probe(OutcomeSkippedFresh); n != tt.want.SkippedFresh {
					t.Errorf("skipped_fresh observed %d", n)
				}
				if n := obs.probe(OutcomeHedge); n != tt.want.Hedged {
					t.Errorf("hedge observed %d", n)
				}
				// Every answer was Reported as a probe.
				for _, s := range append(cands, spares...) {
					if l := s.Latest(); l != nil && !slices.Contains(tt.fresh, s.Addr()) && l.Source != SourceProbe {
						t.Errorf("%s: source %v", s.Addr(), l.Source)
					}
				}
			})
		})
	}
}

// TestProberLateAnswerReported: a Fetcher that cannot be cancelled (like
// fasthttp) answers after the decision; its answer is still Reported.
func TestProberLateAnswerReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeFetcher()
		f.delay["a"], f.delay["b"] = ms, 3*ms
		f.deaf["b"] = true
		cands := states("a", "b")
		p := NewProber(ProberConfig{Deadline: 5 * ms, Quorum: 1}, f, nil, nil)
		res := p.Run(context.Background(), cands, nil)
		if res.Answered != 1 || res.Waited != ms || cands[1].Latest() != nil {
			t.Fatalf("Run = %+v, b latest %v", res, cands[1].Latest())
		}
		time.Sleep(2 * ms)
		synctest.Wait()
		l := cands[1].Latest()
		if l == nil || l.Source != SourceProbe || time.Since(l.At) != 0 {
			t.Fatalf("late answer not reported: %+v", l)
		}
	})
}

// TestProberConcurrentRuns: one Prober serves many requests at once.
func TestProberConcurrentRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeFetcher()
		f.delay["a"], f.delay["b"], f.delay["c"] = ms, 2*ms, time.Hour
		backends := states("a", "b", "c")
		p := NewProber(ProberConfig{Deadline: 5 * ms, HedgeAfter: 3 * ms, Hedges: 1, Quorum: 2}, f, nil, nil)
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				cands := []*State{backends[i%3], backends[(i+1)%3]}
				res := p.Run(context.Background(), cands, []*State{backends[(i+2)%3]})
				if res.Answered+res.SkippedFresh < 2 && res.Waited != 5*ms {
					t.Errorf("Run = %+v", res)
				}
			})
		}
		wg.Wait()
		synctest.Wait()
		if n := f.active.Load(); n != 0 {
			t.Errorf("%d probes still running", n)
		}
	})
}

// TestProberParentCtx: a caller's cancellation (client gone) ends Run.
func TestProberParentCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeFetcher()
		f.delay["a"] = time.Hour
		p := NewProber(ProberConfig{Deadline: 5 * ms}, f, nil, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 2*ms)
		defer cancel()
		if res := p.Run(ctx, states("a"), nil); res.Waited != 2*ms {
			t.Fatalf("Run = %+v", res)
		}
		synctest.Wait()
	})
}

// TestProberAutoHedge: with AutoHedge the hedge fires at the p95 of recent
// round trips.
func TestProberAutoHedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeFetcher()
		f.delay["fast"] = ms
		p := NewProber(ProberConfig{Deadline: 10 * ms, AutoHedge: true, Hedges: 1, Quorum: 1}, f, nil, nil)
		if got := p.HedgeAfter(); got != 5*ms {
			t.Fatalf("cold HedgeAfter = %v, want Deadline/2", got)
		}
		for range hedgeRing {
			p.Run(context.Background(), states("fast"), nil)
		}
		if got := p.HedgeAfter(); got != ms {
			t.Fatalf("HedgeAfter = %v, want 1ms", got)
		}
		f.delay["slow"] = time.Hour
		f.delay["spare"] = ms / 2
		res := p.Run(context.Background(), states("slow"), states("spare"))
		if res.Hedged != 1 || res.Answered != 1 || res.Waited != ms+ms/2 {
			t.Fatalf("Run = %+v", res)
		}
		synctest.Wait()
	})
}

func TestProberConfigFrom(t *testing.T) {
	base := config.Probe{Endpoint: "load", Deadline: config.Duration(5 * ms), HedgeAfter: "auto", Hedges: 1, FreshFor: config.Duration(2 * ms)}
	pc, err := ProberConfigFrom(base, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := ProberConfig{Endpoint: EndpointLoad, Deadline: 5 * ms, AutoHedge: true, Hedges: 1, Quorum: 2, FreshFor: 2 * ms}
	if pc != want {
		t.Errorf("got %+v, want %+v", pc, want)
	}
	c := base
	c.HedgeAfter, c.Quorum = "2ms", 1
	if pc, err := ProberConfigFrom(c, 1); err != nil || pc.HedgeAfter != 2*ms || pc.AutoHedge || pc.Quorum != 1 {
		t.Errorf("got %+v, %v", pc, err)
	}
	if pc, _ := ProberConfigFrom(base, 1); pc.Quorum != 1 {
		t.Errorf("d=1 quorum %d", pc.Quorum)
	}
	// Only what cannot be converted fails here; bounds are Validate's.
	for name, mut := range map[string]func(*config.Probe){
		"endpoint": func(c *config.Probe) { c.Endpoint = "health" },
		"hedge":    func(c *config.Probe) { c.HedgeAfter = "soon" },
	} {
		c := base
		mut(&c)
		if _, err := ProberConfigFrom(c, 2); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// loopbackServer serves a small /load body (and vLLM-like /metrics) with
// fasthttp on a real loopback socket, after delay.
func loopbackServer(tb testing.TB, delay time.Duration) *State {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	metrics := realisticMetrics()
	stop := make(chan struct{}) // cuts a delay short at cleanup
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-stop:
			}
		}
		if string(ctx.Path()) == "/metrics" {
			ctx.SetBody(metrics)
			return
		}
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"server_load": 3}`)
	}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	tb.Cleanup(func() {
		close(stop)
		srv.Shutdown()
		<-done
	})
	return NewState(ln.Addr().String())
}

// TestProberLoopback runs the prober end to end over real sockets: one
// backend answers at once, the other only long after the deadline; Run must
// return with the fast answer and the slow one timed out, having waited for
// the deadline (quorum 2) or not even that (quorum 1), never for the slow
// answer. How close to the deadline it returns is wall-clock time on a
// possibly loaded machine, so that precision is left to the synctest tests
// above (TestProberRun); here the slow answer is 50x the deadline away.
//
// The fast answer must come within the 40 ms deadline, dial included: a
// starved process (GOMAXPROCS=1 beside busy loops, paused 500 ms every 1-3
// s) missed it, and both probes timed out. Such a round says nothing of
// which answer Run takes, so it is run again on fresh servers and state, up to five times; a
// Run that never takes an answer in time fails all five, and one that
// waits for the slow answer fails the first.
func TestProberLoopback(t *testing.T) {
	const rounds = 5
	for round := 1; ; round++ {
		if proberLoopbackRound(t) {
			return
		}
		if round == rounds {
			t.Fatalf("the fast answer missed the deadline in each of %d rounds", rounds)
		}
		t.Logf("round %d: the fast answer missed the deadline or came in past it (a starved process); again on fresh servers", round)
	}
}

// proberLoopbackRound is one round of TestProberLoopback on fresh servers
// and states. It returns false when the fast answer missed a Run's
// deadline, or came in past the first Run's (what the round checked before
// that stands).
func proberLoopbackRound(t *testing.T) bool {
	const (
		deadline = 40 * ms
		// Cut short at cleanup (loopbackServer), so it costs no time.
		slowness = 10 * time.Second
		// Far from both: a Run that waited for the slow answer takes 10
		// s; a starved one can take a 500 ms pause on top of the deadline.
		notWaited = slowness / 4
	)
	fast, slow := loopbackServer(t, 0), loopbackServer(t, slowness)
	f := &HTTPFetcher{}
	defer func() {
		f.Forget(fast)
		f.Forget(slow)
	}()
	p := NewProber(ProberConfig{Endpoint: EndpointLoad, Deadline: deadline, HedgeAfter: time.Hour, Quorum: 2}, f, nil, nil)
	start := time.Now()
	res := p.Run(context.Background(), []*State{fast, slow}, nil)
	el := time.Since(start)
	t.Logf("Run = %+v in %v", res, el)
	if el > notWaited {
		t.Errorf("Run took %v, want the deadline %v (and far less than the slow answer's %v)", el, deadline, slowness)
	}
	if res.Answered == 0 && res.TimedOut == 2 && el >= deadline {
		return false
	}
	if res.Answered != 1 || res.TimedOut != 1 {
		t.Errorf("Run = %+v, want the fast answer and the slow one timed out", res)
	}
	if el < deadline {
		t.Errorf("Run took %v, want the deadline %v (quorum 2 waits for it)", el, deadline)
	}
	if l := fast.Latest(); l == nil || l.ServerLoad != 3 || l.Source != SourceProbe {
		t.Errorf("fast latest = %+v", l)
	}
	// A starved Run can count the fast answer although its probe landed
	// past the deadline (fly read the clock late; the answer and the
	// deadline were both ready when Run looked): the prober then holds
	// fast as slow (markSlow) and the next Run does not wait for it, so
	// the second Run below would find both backends skipped as slow
	// (Answered 0, TimedOut 0, SkippedSlow 2) and test nothing.
	if fast.probeSlowUntil.Load() != 0 {
		return false
	}
	// With the default quorum (d-1 = 1) the fast answer decides.
	p = NewProber(ProberConfig{Endpoint: EndpointMetrics, Deadline: deadline, HedgeAfter: time.Hour}, f, nil, nil)
	start = time.Now()
	res = p.Run(context.Background(), []*State{slow, fast}, nil)
	el = time.Since(start)
	if el > notWaited {
		t.Errorf("Run = %+v in %v, want the fast answer alone", res, el)
	}
	if res.Answered == 0 && res.TimedOut > 0 {
		return false // the fast answer missed the deadline again
	}
	if res.Answered != 1 {
		t.Errorf("Run = %+v in %v, want the fast answer alone", res, el)
	}
	if l := fast.Latest(); l == nil || l.Running != 12 || l.Queue() != 15 {
		t.Errorf("fast latest = %+v", l)
	}
	return true
}

// BenchmarkProberRun measures the latency a probe adds to a request: Run
// against fasthttp servers on loopback serving a small /load body, d = 2,
// default quorum (1), no fresh skipping. It reports the p50 and p99 of Run's
// duration as custom metrics.
func BenchmarkProberRun(b *testing.B) {
	for _, d := range []int{2, 3} {
		b.Run(fmt.Sprintf("d=%d", d), func(b *testing.B) {
			backends := make([]*State, 4)
			for i := range backends {
				backends[i] = loopbackServer(b, 0)
			}
			f := &HTTPFetcher{}
			b.Cleanup(func() {
				for _, s := range backends {
					f.Forget(s)
				}
			})
			p := NewProber(ProberConfig{Endpoint: EndpointLoad, Deadline: 50 * ms, AutoHedge: true, Hedges: 1}, f, nil, nil)
			lat := make([]time.Duration, 0, 1<<16)
			ctx := context.Background()
			i, unanswered := 0, 0
			b.ReportAllocs()
			for b.Loop() {
				cands := backends[i%2 : i%2+d]
				i++
				start := time.Now()
				res := p.Run(ctx, cands, backends[:1])
				lat = append(lat, time.Since(start))
				if res.Answered == 0 {
					// Every probe missed the 50 ms deadline: on a shared
					// machine a stall can do that; counted, not fatal.
					unanswered++
				}
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2])/1e3, "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100])/1e3, "p99-µs")
			b.ReportMetric(float64(unanswered)/float64(i), "unanswered/call")
		})
	}
	// 32 requests at a time asking about the same 2 backends (the overhead
	// scenario's shape): probes sent per Run shows how many share one.
	b.Run("callers=32/backends=2", func(b *testing.B) {
		backends := []*State{loopbackServer(b, 0), loopbackServer(b, 0)}
		f := &HTTPFetcher{}
		b.Cleanup(func() {
			for _, s := range backends {
				f.Forget(s)
			}
		})
		obs := &sentObserver{}
		p := NewProber(ProberConfig{Endpoint: EndpointLoad, Deadline: 50 * ms, AutoHedge: true, Hedges: 1, Quorum: 2}, f, obs, nil)
		var calls, unanswered atomic.Int64
		b.SetParallelism(16) // 16 x GOMAXPROCS goroutines
		if n := 16 * runtime.GOMAXPROCS(0); n != 32 {
			b.Logf("%d callers (GOMAXPROCS %d)", n, runtime.GOMAXPROCS(0))
		}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				if res := p.Run(ctx, backends, nil); res.Answered == 0 {
					unanswered.Add(1)
				}
				calls.Add(1)
			}
		})
		time.Sleep(5 * ms) // let the last probes land
		if n := calls.Load(); n > 0 {
			b.ReportMetric(float64(obs.sent.Load())/float64(n), "probes/call")
			b.ReportMetric(float64(unanswered.Load())/float64(n), "unanswered/call")
		}
	})
}

// sentObserver counts probes sent (each completes once).
type sentObserver struct {
	NopObserver
	sent atomic.Int64
}

func (o *sentObserver) Probe(outcome string, _ time.Duration) {
	switch outcome {
	case OutcomeOK, OutcomeTimeout, OutcomeError, OutcomeCancelled:
		o.sent.Add(1)
	}
}

// A report older than FreshFor but younger than twice it is used at once
// and refreshed by a probe nobody waits for (stale-while-revalidate); one
// older than that is waited for as before; without FreshFor, every Run
// waits.
func TestProberRecentStateRefreshedNotWaited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeFetcher()
		f.delay["a"], f.delay["b"] = ms, ms
		cands := states("a", "b")
		report := func(s *State, age time.Duration) {
			l := Unknown(time.Now().Add(-age), SourceScrape)
			l.Running, l.Waiting = 7, 7
			s.Report(&l)
		}
		obs := newCountObserver()
		p := NewProber(ProberConfig{Deadline: 5 * ms, HedgeAfter: time.Hour, Quorum: 2, FreshFor: 2 * ms}, f, obs, nil)

		// a recent (3ms, within 2 x 2ms), b stale (5ms): Run waits for b
		// only, and a's refresh answers in the background.
		report(cands[0], 3*ms)
		report(cands[1], 5*ms)
		res := p.Run(context.Background(), cands, nil)
		want := Result{Probed: 1, Answered: 1, SkippedRecent: 1, Waited: ms}
		if res != want {
			t.Fatalf("Run = %+v\nwant  %+v", res, want)
		}
		synctest.Wait()
		if calls := f.called(); len(calls) != 2 || !slices.Contains(calls, "a") {
			t.Fatalf("fetched %q, want a refreshed in the background and b probed", calls)
		}
		if l := cands[0].Latest(); l.Source != SourceProbe || time.Since(l.At) != 0 {
			t.Fatalf("a's refresh not reported: %+v", l)
		}
		if obs.probe(OutcomeSkippedRecent) != 1 || obs.probe(OutcomeOK) != 2 {
			t.Fatalf("outcomes %v", obs.probeCounts())
		}

		// Both recent: nothing waited for, one refresh each, and a Run
		// arriving while they fly neither waits nor sends more.
		time.Sleep(3 * ms)
		res = p.Run(context.Background(), cands, nil)
		if want := (Result{SkippedRecent: 2}); res != want {
			t.Fatalf("Run = %+v, want %+v", res, want)
		}
		res = p.Run(context.Background(), cands, nil)
		if want := (Result{SkippedRecent: 2}); res != want {
			t.Fatalf("second Run = %+v, want %+v", res, want)
		}
		time.Sleep(ms)
		synctest.Wait()
		if n := len(f.called()); n != 4 {
			t.Fatalf("%d fetches, want 4 (one refresh per backend for both Runs)", n)
		}

		// Without FreshFor nothing is recent: the Run waits.
		time.Sleep(3 * ms)
		p = NewProber(ProberConfig{Deadline: 5 * ms, HedgeAfter: time.Hour, Quorum: 2}, f, nil, nil)
		if res := p.Run(context.Background(), cands, nil); res.Probed != 2 || res.SkippedRecent != 0 || res.Waited != ms {
			t.Fatalf("FreshFor 0: Run = %+v, want both probed and waited for", res)
		}
	})
}
