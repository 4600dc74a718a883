package fleetsim

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/probegate/probegate/bench"
)

// The arrival processes keep the mean rate and have their shape: onoff's
// bursts carry onOffHigh x the mean, its lulls the rest; ramp's last third
// arrives faster than its first.
func TestArrivalShapes(t *testing.T) {
	const rate, dur = 50.0, 120 * time.Second
	for _, shape := range ArrivalShapes {
		w, err := GeneralWorkload(SizesUniform, shape, nil)
		if err != nil {
			t.Fatal(err)
		}
		jobs := DrawJobs(w, rate, dur, 7)
		got := float64(len(jobs)) / dur.Seconds()
		if math.Abs(got/rate-1) > 0.05 {
			t.Errorf("%s: %.1f arrivals/s, want the mean rate %.0f within 5%%", shape, got, rate)
		}
		var on, off, first, last int
		for _, j := range jobs {
			if j.At%onOffPeriod < onOffOn {
				on++
			} else {
				off++
			}
			switch {
			case j.At < dur/3:
				first++
			case j.At >= 2*dur/3:
				last++
			}
		}
		onRate := float64(on) / (dur.Seconds() * float64(onOffOn) / float64(onOffPeriod))
		offRate := float64(off) / (dur.Seconds() * float64(onOffPeriod-onOffOn) / float64(onOffPeriod))
		switch shape {
		case ArrivalsOnOff:
			if r := onRate / rate; math.Abs(r-onOffHigh) > 0.3 {
				t.Errorf("onoff: bursts at %.2fx the mean, want %.1fx", r, onOffHigh)
			}
			if r := offRate / rate; r > 0.45 {
				t.Errorf("onoff: lulls at %.2fx the mean, want about 1/3", r)
			}
		case ArrivalsRamp:
			// 0.5x -> 1.5x: the last third carries 1.33x the mean, the first 0.67x.
			if r := float64(last) / float64(first); r < 1.7 || r > 2.3 {
				t.Errorf("ramp: last third / first third = %.2f, want about 2", r)
			}
		case ArrivalsPoisson:
			if r := onRate / offRate; math.Abs(r-1) > 0.15 {
				t.Errorf("poisson: burst-phase rate / lull-phase rate = %.2f, want 1", r)
			}
		}
	}
	if _, err := GeneralWorkload(SizesUniform, "sawtooth", nil); err == nil {
		t.Error("an unknown arrival process was accepted")
	}
}

// A fleet kind sets what it says, and a small KV cache reaches the pod's
// engine (while still holding one request of the longest length).
func TestFleetShapes(t *testing.T) {
	slow, _, err := FleetShape(FleetTwoSpeed, 4, 1024, 16)
	if err != nil || slow[0] != 1 || slow[1] != 1 || slow[2] != 2 || slow[3] != 2 {
		t.Errorf("twospeed: %v %v", slow, err)
	}
	slow, kv, err := FleetShape(FleetSmallKV, 4, 2048, 16)
	if err != nil || kv[3] != 2048/4+1 || kv[0] != 0 || slow[3] != 1 {
		t.Fatalf("smallkv: %v %v %v", slow, kv, err)
	}
	w := LognormalWorkload()
	cfg := Config{Pods: 4, Replicas: 1, Strategy: bench.RoundRobin, Workload: w, Rate: 4, Duration: time.Second,
		Sim: PodSim(w), Slowdown: BenchSlowdown, Params: DefaultParams(), Seed: 1, PodSlowdown: slow, PodKVBlocks: kv}
	s, err := newSim(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.pods[3].eng.Config().NumGPUBlocks; got != kv[3] {
		t.Errorf("the small pod's engine has %d blocks, want %d", got, kv[3])
	}
	if got := s.pods[0].eng.Config().NumGPUBlocks; got != PodSim(w).NumGPUBlocks {
		t.Errorf("a normal pod's engine has %d blocks, want %d", got, PodSim(w).NumGPUBlocks)
	}
}

// A loss needs every seed worse and the pooled ratio beyond 5%.
func TestGeneralVerdict(t *testing.T) {
	run := func(p99 float64, seeds ...float64) *GeneralRun {
		return &GeneralRun{Name: "x", P99: p99, P50: p99, SeedP99: seeds, SeedP50: seeds}
	}
	for _, c := range []struct {
		probe, rival *GeneralRun
		loss, win    bool
	}{
		{run(110, 11, 12, 13), run(100, 10, 11, 12), true, false},
		{run(104, 11, 12, 13), run(100, 10, 11, 12), false, false}, // within 5%
		{run(120, 11, 10, 13), run(100, 10, 11, 12), false, false}, // one seed better
		{run(80, 9, 10, 11), run(100, 10, 11, 12), false, true},
	} {
		v := verdict(c.probe, c.rival, true)
		if v.Loss != c.loss || v.Win != c.win {
			t.Errorf("probe %v vs %v: loss %v win %v, want %v %v", c.probe.SeedP99, c.rival.SeedP99, v.Loss, v.Win, c.loss, c.win)
		}
	}
}

// One small cell runs end to end: every strategy is measured over every
// seed, the best blind policy is named, and the same options give the
// same figures (the sweep is deterministic, parallel or not).
func TestGeneralSweepCell(t *testing.T) {
	o := DefaultGeneralOptions()
	o.Sizes, o.Arrivals, o.Fleets, o.Lives = []string{SizesBimodal}, []string{ArrivalsOnOff}, []string{FleetOneSlow}, []string{LifeLong}
	o.Pods, o.Replicas, o.Loads, o.Seeds, o.Requests = []int{4}, []int{2}, []float64{0.6}, 2, 60
	o.MinDuration = 8 * time.Second
	a, err := GeneralSweep(o)
	if err != nil {
		t.Fatal(err)
	}
	o.Parallel = 3
	b, err := GeneralSweep(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 1 || len(a[0].Runs) != len(GeneralStrategies) {
		t.Fatalf("got %d cells", len(a))
	}
	c := a[0]
	if c.Name != "bimodal/onoff/oneslow/long/n4/r2/load60" || !blind(c.BlindP99.Rival) || c.CachedP99.Rival != bench.Cached {
		t.Errorf("cell %s: rivals %s, %s", c.Name, c.BlindP99.Rival, c.CachedP99.Rival)
	}
	for i, r := range c.Runs {
		if len(r.SeedP99) != 2 || r.Requests < 60 || r.P99 <= 0 || r.Errors != 0 {
			t.Errorf("%s: %d seeds, %d requests, p99 %v, %d errors", r.Name, len(r.SeedP99), r.Requests, r.P99, r.Errors)
		}
		if r.P99 != b[0].Runs[i].P99 || r.P50 != b[0].Runs[i].P50 {
			t.Errorf("%s: p99 %v / %v serial, %v / %v parallel", r.Name, r.P99, r.P50, b[0].Runs[i].P99, b[0].Runs[i].P50)
		}
	}
}

// A "+key=value" tweak reaches the replicas' load model; an unknown key
// or a value the configuration refuses is an error.
func TestStrategyTweaks(t *testing.T) {
	w := UniformWorkload()
	cfg := Config{Pods: 2, Replicas: 1, Strategy: "probe+dw=2.5+ww=0", Workload: w, Rate: 4, Duration: time.Second,
		Sim: PodSim(w), Slowdown: BenchSlowdown, Params: DefaultParams(), Seed: 1}
	s, err := newSim(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.tweaks) != 2 || s.tweaks[0] != (tweak{"dw", 2.5}) || s.tweaks[1] != (tweak{"ww", 0}) {
		t.Errorf("tweaks %v", s.tweaks)
	}
	cfg.Strategy = "probe+sf=0.5"
	if s, err = newSim(cfg); err != nil || len(s.tweaks) != 1 || s.tweaks[0] != (tweak{"sf", 0.5}) {
		t.Errorf("probe+sf=0.5: %v %v", s, err)
	}
	cfg.Strategy = "probe+fc=0"
	s, err = newSim(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.tweaks) != 1 || s.tweaks[0] != (tweak{"fc", 0}) {
		t.Errorf("tweaks %v", s.tweaks)
	}
	cfg.Strategy = "probe+fb=20"
	if s, err = newSim(cfg); err != nil {
		t.Fatal(err)
	}
	if got := s.replicas[0].scrape.ForeignBudget; len(s.tweaks) != 1 || got != 20 {
		t.Errorf("probe+fb=20: tweaks %v, the replica's scrape.foreign_budget %v", s.tweaks, got)
	}
	for _, bad := range []string{"probe+xx=1", "probe+dw", "probe+psf=2", "probe+fc=-1", "probe+fb=-1", "probe+sf=1.5"} {
		cfg.Strategy = bad
		if _, err := newSim(cfg); err == nil {
			t.Errorf("%s was accepted", bad)
		}
	}
}

// The sizes added in session 16 draw what their doc says, and a cell's
// seats reach its pods (with the KV cache grown alike) and its name, which
// keeps the bench pods' cells named as before.
func TestGeneralSizesAndSeats(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	w, err := GeneralWorkload(SizesFixed, ArrivalsPoisson, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p, o := w.Sizes(rng); p != 1024 || o != 128 {
		t.Errorf("fixed: %d, %d tokens", p, o)
	}
	if w, err = GeneralWorkload(SizesDecode, ArrivalsPoisson, nil); err != nil {
		t.Fatal(err)
	}
	var ps, os []float64
	for range 4000 {
		p, o := w.Sizes(rng)
		ps, os = append(ps, float64(p)), append(os, float64(o))
	}
	if p, o := bench.Percentile(ps, 50), bench.Percentile(os, 50); math.Abs(p/300-1) > 0.1 || math.Abs(o/250-1) > 0.1 {
		t.Errorf("decode_heavy medians: prompt %.0f, output %.0f; want 300, 250", p, o)
	}
	base := PodSim(w)
	if s := GeneralPodSim(w, 16); s.MaxNumSeqs != 16 || s.NumGPUBlocks != 4*base.NumGPUBlocks {
		t.Errorf("16 seats: %d seats, %d blocks (4 seats: %d)", s.MaxNumSeqs, s.NumGPUBlocks, base.NumGPUBlocks)
	}
	if s := GeneralPodSim(w, 0); s.MaxNumSeqs != base.MaxNumSeqs || s.NumGPUBlocks != base.NumGPUBlocks {
		t.Errorf("0 seats is not PodSim's pod")
	}
	c := generalCell{sizes: SizesDecode, arrivals: ArrivalsPoisson, fleet: FleetHomo, life: LifeLong, pods: 4, reps: 1, seats: 16, load: 0.6}
	if got := c.name(); got != "decode_heavy/poisson/homo/long/n4/s16/r1/load60" {
		t.Errorf("name %s", got)
	}
	if c.seats = podSeats; c.name() != "decode_heavy/poisson/homo/long/n4/r1/load60" {
		t.Errorf("name %s", c.name())
	}
}
