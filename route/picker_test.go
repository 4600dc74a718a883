package route

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/probe"
)

// These tests build every Picker the way a simulator does (NewBackend,
// NewPool, NewPicker): no Proxy, no sockets, a frozen clock, a seeded
// random source, synthetic views and a fake prober.

var pickT0 = time.Unix(1_800_000_000, 0)

func pickNow() time.Time { return pickT0 }

func seeded(seed uint64) Rand { return rand.New(rand.NewPCG(seed, seed^0x5eed)).Uint64 }

// testPool returns a pool of n backends named b0..b(n-1).
func testPool(n int) (*Pool, []*Backend) {
	bs := make([]*Backend, n)
	for i := range bs {
		bs[i] = NewBackend(fmt.Sprintf("b%d:8000", i), 1024)
	}
	return NewPool(bs), bs
}

// testPickerConfig is config.Default()'s picker settings with policy pol.
func testPickerConfig(pol string) PickerConfig {
	cfg := config.Default()
	cfg.Route.Policy = pol
	return PickerConfigFrom(cfg)
}

func mustPicker(t testing.TB, pc PickerConfig, pool *Pool, d Deps) Picker {
	t.Helper()
	pk, err := NewPicker(pc, pool, d)
	if err != nil {
		t.Fatal(err)
	}
	return pk
}

// fixedViews is a ViewSource of synthetic views by backend; a backend it
// does not list is idle and unknown.
type fixedViews map[*Backend]probe.View

func (f fixedViews) View(b *Backend, _ time.Time, _ time.Duration) probe.View {
	if v, ok := f[b]; ok {
		return v
	}
	return probe.View{KVUse: -1, Waiting: -1, Source: probe.SourceLocal}
}

func known(q float64) probe.View {
	return probe.View{Queue: q, KVUse: 0.2, Waiting: 0, Source: probe.SourceScrape}
}

// fakeProber records what it was asked to probe and Reports, as probe
// answers, the queue loads gives each address (an address not listed does
// not answer). It claims to have used sparesUsed spares.
type fakeProber struct {
	loads      map[string]int
	sparesUsed int
	at         time.Time // the newest answer's At; each Run answers later
	cands      []string
	spares     []string
}

func (f *fakeProber) Run(_ context.Context, cands, spares []*probe.State) probe.Result {
	f.cands, f.spares = f.cands[:0], f.spares[:0]
	if f.at.IsZero() {
		f.at = pickT0
	}
	f.at = f.at.Add(time.Microsecond)
	answer := func(s *probe.State) {
		if q, ok := f.loads[s.Addr()]; ok {
			l := probe.Load{Running: q, Waiting: 0, KVUse: 0.3, ServerLoad: -1, At: f.at, Source: probe.SourceProbe}
			s.Report(&l)
		}
	}
	for _, s := range cands {
		f.cands = append(f.cands, s.Addr())
		answer(s)
	}
	n := min(f.sparesUsed, len(spares))
	for _, s := range spares[:n] {
		f.spares = append(f.spares, s.Addr())
		answer(s)
	}
	return probe.Result{Probed: len(cands) + n, SparesUsed: n}
}

func TestPoliciesAreListedOnce(t *testing.T) {
	var names []string
	for name := range policies {
		names = append(names, name)
	}
	want := config.Policies()
	sort.Strings(names)
	sort.Strings(want)
	if !slices.Equal(names, want) {
		t.Fatalf("route's picker table has %v, internal/config accepts %v", names, want)
	}
}

func TestNewPickerRejects(t *testing.T) {
	pool, _ := testPool(2)
	mem := &Memory{}
	for _, c := range []struct {
		name string
		edit func(*PickerConfig)
		deps Deps
	}{
		{"unknown policy", func(pc *PickerConfig) { pc.Policy = "oracle" }, Deps{Memory: mem}},
		{"d negative", func(pc *PickerConfig) { pc.D = -1 }, Deps{Memory: mem}},
		{"d above MaxD", func(pc *PickerConfig) { pc.D = config.MaxD + 1 }, Deps{Memory: mem}},
		{"no memory", func(*PickerConfig) {}, Deps{}},
	} {
		pc := testPickerConfig(config.PolicyProbe)
		c.edit(&pc)
		if _, err := NewPicker(pc, pool, c.deps); err == nil {
			t.Errorf("%s: NewPicker accepted it", c.name)
		}
	}
}

func TestRoundRobinPickerCyclesAndKeepsItsCursor(t *testing.T) {
	pool, bs := testPool(4)
	mem := &Memory{}
	d := Deps{Memory: mem, Now: pickNow}
	pk := mustPicker(t, testPickerConfig(config.PolicyRoundRobin), pool, d)
	s := NewScratch()
	var got []*Backend
	for range 6 {
		b, _, err := pk.Pick(context.Background(), &RequestInfo{}, nil, s)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, b)
	}
	// A rebuilt picker (a reload) continues from the same cursor.
	pk = mustPicker(t, testPickerConfig(config.PolicyRoundRobin), pool, d)
	for range 2 {
		b, _, _ := pk.Pick(context.Background(), &RequestInfo{}, nil, s)
		got = append(got, b)
	}
	for i := 1; i < len(got); i++ {
		prev := slices.Index(bs, got[i-1])
		if want := bs[(prev+1)%len(bs)]; got[i] != want {
			t.Fatalf("pick %d went to %s after %s, want %s", i, got[i].Addr(), got[i-1].Addr(), want.Addr())
		}
	}
	// Excluded backends are skipped.
	b, _, err := pk.Pick(context.Background(), &RequestInfo{}, bs[:3], s)
	if err != nil || b != bs[3] {
		t.Fatalf("with b0..b2 excluded got %v, %v; want b3", b, err)
	}
	if _, _, err := pk.Pick(context.Background(), &RequestInfo{}, bs, s); !errors.Is(err, ErrNoBackend) {
		t.Fatalf("everything excluded: err %v, want ErrNoBackend", err)
	}
}

func TestRandomPickerIsUniform(t *testing.T) {
	pool, bs := testPool(8)
	pk := mustPicker(t, testPickerConfig(config.PolicyRandom), pool, Deps{Memory: &Memory{}, Rand: seeded(1)})
	s := NewScratch()
	hits := map[*Backend]int{}
	const n = 16000
	for range n {
		b, _, err := pk.Pick(context.Background(), &RequestInfo{}, bs[:1], s)
		if err != nil {
			t.Fatal(err)
		}
		hits[b]++
	}
	if hits[bs[0]] != 0 {
		t.Fatalf("the excluded backend was picked %d times", hits[bs[0]])
	}
	for _, b := range bs[1:] {
		// Each of 7 backends expects n/7 = 2286 picks; a binomial standard
		// deviation is about 44, so the band is more than 6 sigma wide.
		if h := hits[b]; h < 2000 || h > 2570 {
			t.Errorf("%s got %d of %d picks, want about %d", b.Addr(), h, n, n/7)
		}
	}
}

func TestLeastInflightPickerPicksTheShortestLocalQueue(t *testing.T) {
	pool, bs := testPool(4)
	for i, b := range bs {
		for range 3 - i%4 { // in flight: 3, 2, 1, 0
			b.State().Dispatch()
		}
	}
	pc := testPickerConfig(config.PolicyLeastInflight)
	pc.D = len(bs) // sample everything, so the shortest always wins
	pk := mustPicker(t, pc, pool, Deps{Memory: &Memory{}, Rand: seeded(2)})
	s := NewScratch()
	for range 50 {
		b, dec, err := pk.Pick(context.Background(), &RequestInfo{}, nil, s)
		if err != nil || b != bs[3] || dec.Source != probe.SourceLocal {
			t.Fatalf("got %v (%v, %v), want b3 from the local count", b, dec, err)
		}
	}
}

func TestCachedPickerScoresTheViews(t *testing.T) {
	pool, bs := testPool(5)
	views := fixedViews{bs[0]: known(6), bs[1]: known(4), bs[2]: known(1), bs[3]: known(9), bs[4]: known(3)}
	pc := testPickerConfig(config.PolicyCached)
	pk := mustPicker(t, pc, pool, Deps{Memory: &Memory{}, Rand: seeded(3), Now: pickNow, Views: views})
	s := NewScratch()
	b, dec, err := pk.Pick(context.Background(), &RequestInfo{}, nil, s)
	if err != nil || b != bs[2] || dec.Source != probe.SourceScrape {
		t.Fatalf("got %v (%+v, %v), want b2, the shortest queue, from a scrape", b, dec, err)
	}
	b, _, _ = pk.Pick(context.Background(), &RequestInfo{}, bs[2:3], s)
	if b != bs[4] {
		t.Fatalf("with b2 excluded got %v, want b4, the next shortest", b)
	}

	// Every candidate saturated and known: shed when configured to.
	for _, b := range bs {
		v := views[b]
		v.Waiting = pc.Saturation.MaxWaiting
		views[b] = v
	}
	pc.Saturation.Shed = true
	pk = mustPicker(t, pc, pool, Deps{Memory: &Memory{}, Rand: seeded(3), Now: pickNow, Views: views})
	if _, _, err := pk.Pick(context.Background(), &RequestInfo{}, nil, s); !errors.Is(err, ErrSaturated) {
		t.Fatalf("all saturated with shed: err %v, want ErrSaturated", err)
	}
}

func TestProbePickerDecidesOnWhatTheProberLearns(t *testing.T) {
	pool, bs := testPool(6)
	// Every backend's cached report says queue 5.
	for _, b := range bs {
		l := probe.Load{Running: 5, Waiting: 0, KVUse: 0.3, ServerLoad: -1, At: pickT0.Add(-time.Second), Source: probe.SourceScrape}
		b.State().Report(&l)
	}
	pc := testPickerConfig(config.PolicyProbe)
	fp := &fakeProber{loads: map[string]int{}}
	pk := mustPicker(t, pc, pool, Deps{Memory: &Memory{}, Rand: seeded(4), Now: pickNow, Prober: fp})
	s := NewScratch()

	// Nothing answers: the decision is on the cached reports, among the
	// d candidates the prober was given.
	b, dec, err := pk.Pick(context.Background(), &RequestInfo{}, nil, s)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := config.AutoSampling(pc.Policy, pool.Len()) // route.d auto
	if len(fp.cands) != d || len(fp.spares) != 0 {
		t.Fatalf("prober got %d candidates, %d spares; want %d, 0", len(fp.cands), len(fp.spares), d)
	}
	if dec.Source != probe.SourceScrape || !slices.Contains(fp.cands, b.Addr()) {
		t.Fatalf("no answers: picked %s from %v (%v), want a candidate on scraped state", b.Addr(), fp.cands, dec.Source)
	}

	// Every probe answers, each backend with a different queue: the
	// candidate with the shortest probed queue wins, on a probe answer.
	for i, b := range bs {
		fp.loads[b.Addr()] = (i*7)%len(bs) + 1
	}
	for range 100 {
		b, dec, err := pk.Pick(context.Background(), &RequestInfo{}, nil, s)
		if err != nil {
			t.Fatal(err)
		}
		best := fp.cands[0]
		for _, a := range fp.cands {
			if fp.loads[a] < fp.loads[best] {
				best = a
			}
		}
		if b.Addr() != best || dec.Source != probe.SourceProbe {
			t.Fatalf("candidates %v (queues %v): picked %s on %v, want %s on a probe", fp.cands, fp.loads, b.Addr(), dec.Source, best)
		}
	}
}

func TestProbePickerUsesHedgedSpares(t *testing.T) {
	pool, bs := testPool(8)
	pc := testPickerConfig(config.PolicyProbe)
	pc.Hedges = 1
	fp := &fakeProber{loads: map[string]int{}, sparesUsed: 1}
	s := NewScratch()
	for range 50 {
		// Every backend answers busy; then the spare is made idle by
		// answering for it last.
		for _, b := range bs {
			fp.loads[b.Addr()] = 9
		}
		spareIdle := &spareProber{fakeProber: fp}
		pk := mustPicker(t, pc, pool, Deps{Memory: &Memory{}, Rand: seeded(5), Now: pickNow, Prober: spareIdle})
		b, dec, err := pk.Pick(context.Background(), &RequestInfo{}, nil, s)
		if err != nil {
			t.Fatal(err)
		}
		if len(fp.spares) != 1 || slices.Contains(fp.cands, fp.spares[0]) {
			t.Fatalf("spares %v, candidates %v: want one spare outside the candidates", fp.spares, fp.cands)
		}
		if b.Addr() != fp.spares[0] || dec.Source != probe.SourceProbe {
			t.Fatalf("picked %s on %v, want the idle hedged spare %s", b.Addr(), dec.Source, fp.spares[0])
		}
	}
}

// spareProber answers like its fakeProber, then makes every spare it used
// idle.
type spareProber struct{ *fakeProber }

func (p *spareProber) Run(ctx context.Context, cands, spares []*probe.State) probe.Result {
	res := p.fakeProber.Run(ctx, cands, spares)
	for _, s := range spares[:res.SparesUsed] {
		l := probe.Load{Running: 0, Waiting: 0, KVUse: 0.3, ServerLoad: -1, At: p.at.Add(time.Nanosecond), Source: probe.SourceProbe}
		s.Report(&l)
	}
	return res
}

func TestViewSourceReplacesReports(t *testing.T) {
	pool, bs := testPool(4)
	// The reports say b0 is idle; the view source (an oracle) says b3 is.
	for i, b := range bs {
		l := probe.Load{Running: 4 * i, Waiting: 0, KVUse: 0.3, ServerLoad: -1, At: pickT0, Source: probe.SourceScrape}
		b.State().Report(&l)
	}
	oracle := fixedViews{}
	for i, b := range bs {
		v := known(float64(10 - 3*i))
		v.Source = probe.SourceOracle
		oracle[b] = v
	}
	pk := mustPicker(t, testPickerConfig(config.PolicyCached), pool, Deps{Memory: &Memory{}, Rand: seeded(6), Now: pickNow, Views: oracle})
	b, dec, err := pk.Pick(context.Background(), &RequestInfo{}, nil, NewScratch())
	if err != nil || b != bs[3] || dec.Source != probe.SourceOracle {
		t.Fatalf("got %v (%v, %v), want b3 from the oracle", b, dec.Source, err)
	}
}

// TestEveryPickerIsAllocationFree drives every picker over 64 backends with fresh
// reports. Without a Proxy there is no background goroutine to allocate
// behind the measurement's back.
func TestEveryPickerIsAllocationFree(t *testing.T) {
	for _, pol := range config.Policies() {
		t.Run(pol, func(t *testing.T) {
			pool, bs := testPool(64)
			for i, b := range bs {
				l := probe.Load{Running: i % 7, Waiting: i % 3, KVUse: float64(i%10) / 10, ServerLoad: -1, At: pickT0, Source: probe.SourceScrape}
				b.State().Report(&l)
			}
			fp := &fakeProber{}
			pk := mustPicker(t, testPickerConfig(pol), pool, Deps{Memory: &Memory{}, Rand: seeded(7), Now: pickNow, Prober: fp})
			s := NewScratch()
			info := &RequestInfo{}
			ctx := context.Background()
			_, _, _ = pk.Pick(ctx, info, nil, s) // warm the scratch space
			if n := leastAllocsPerRun(200, func() { _, _, _ = pk.Pick(ctx, info, nil, s) }); n != 0 {
				t.Fatalf("policy %s: %.1f allocations per pick, want 0", pol, n)
			}
		})
	}
}

// route.load.speed_band in requests mode: two idle backends this proxy
// learned prefill 4x slower than a third with one request running lose to
// it (expected time to first token 1 x 400 us against 2 x 100 us a token),
// in the probe policy (its memory slot too: with d = 2, a slot given to a
// slow backend leaves a random one that is slow half the time) and in
// cached; without the band the shorter queue always wins.
func TestSpeedBandSteersAwayFromSlowBackend(t *testing.T) {
	for _, pol := range []string{config.PolicyProbe, config.PolicyCached} {
		for _, band := range []float64{0, 1.25} {
			pool, bs := testPool(3)
			for i, b := range bs {
				l := probe.Load{Running: i / 2, Waiting: 0, KVUse: 0.3, ServerLoad: -1, At: pickT0, Source: probe.SourceScrape}
				b.State().Report(&l)
			}
			bs[0].State().PrefillDone(0, 400*time.Millisecond, 1000) // 400 us a token
			bs[1].State().PrefillDone(0, 400*time.Millisecond, 1000)
			bs[2].State().PrefillDone(0, 100*time.Millisecond, 1000) // 100 us
			pc := testPickerConfig(pol)
			pc.Load.Tokens = false // the band is requests mode's
			pc.Load.SpeedBand = band
			pk := mustPicker(t, pc, pool, Deps{Memory: &Memory{}, Rand: seeded(9), Now: pickNow})
			s := NewScratch()
			fast := 0
			for range 200 {
				b, _, err := pk.Pick(context.Background(), &RequestInfo{PromptTokens: 1000}, nil, s)
				if err != nil {
					t.Fatal(err)
				}
				if b == bs[2] {
					fast++
				}
			}
			switch {
			case band > 0 && fast != 200:
				t.Errorf("%s, speed_band %v: the fast backend got %d of 200, want all", pol, band, fast)
			case band == 0 && fast != 0:
				t.Errorf("%s, speed_band 0: the fast, busier backend got %d of 200, want none (speed ignored)", pol, fast)
			}
		}
	}
}

// Tokens mode on two identical backends this proxy learned at 100 us a
// token: the idle one wins against one with a request running, even after
// three of its 15 first bytes were stalled 10x by the machine (the learned
// speed is a median: a mean over the last ten would make it 3.4x slower and
// send every request to the busier backend).
func TestTokensModeShrugsOffStalledFirstBytes(t *testing.T) {
	for _, pol := range []string{config.PolicyCached, config.PolicyProbe} {
		pool, bs := testPool(2)
		for i, b := range bs {
			l := probe.Load{Running: i, Waiting: 0, KVUse: 0.3, ServerLoad: -1, At: pickT0, Source: probe.SourceScrape}
			b.State().Report(&l)
			for j := range 15 {
				d := 100 * time.Millisecond // 100 us a token over 1,000
				if i == 0 && j >= 12 {
					d *= 10
				}
				b.State().AddWork(1000, 0)
				b.State().PrefillDone(1000, d, 1000)
			}
		}
		pc := testPickerConfig(pol)
		pc.Load.Tokens = true
		pk := mustPicker(t, pc, pool, Deps{Memory: &Memory{}, Rand: seeded(9), Now: pickNow})
		s := NewScratch()
		idle := 0
		for range 200 {
			b, _, err := pk.Pick(context.Background(), &RequestInfo{PromptTokens: 1000}, nil, s)
			if err != nil {
				t.Fatal(err)
			}
			if b == bs[0] {
				idle++
			}
		}
		if idle != 200 {
			t.Errorf("%s: the idle backend got %d of 200 picks, want all", pol, idle)
		}
	}
}
