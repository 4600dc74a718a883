package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/vllmsim"
)

// TestBimodalSizes checks -sizes bimodal's distribution: 80% chat turns
// (prompt 64-512, output 32-256 tokens) and 20% documents (3,000-7,000 and
// 8-64), nothing between the modes, each range covered, and prompts of
// exactly the drawn tokens. Without the bimodal branch the workload draws
// the code trace's lognormal, whose prompts fill the gap between the modes.
func TestBimodalSizes(t *testing.T) {
	w := sizedWorkload(&Options{Sizes: SizesBimodal}, 8)
	rng := rand.New(rand.NewPCG(7, 8))
	const n = 20000
	var chat, doc int
	var chatOut, docPrompt []float64
	var chatPromptLo, chatPromptHi, chatOutHi, docPromptLo, docPromptHi bool
	for range n {
		p, o := w.drawTokens(rng)
		switch {
		case p >= 64 && p <= 512:
			chat++
			if o < 32 || o > 256 {
				t.Fatalf("chat turn of %d prompt tokens with %d output tokens, want 32-256", p, o)
			}
			chatOut = append(chatOut, float64(o))
			chatPromptLo, chatPromptHi, chatOutHi = chatPromptLo || p < 100, chatPromptHi || p > 480, chatOutHi || o > 240
		case p >= 3000 && p <= 7000:
			doc++
			if o < 8 || o > 64 {
				t.Fatalf("document of %d prompt tokens with %d output tokens, want 8-64", p, o)
			}
			docPrompt = append(docPrompt, float64(p))
			docPromptLo, docPromptHi = docPromptLo || p < 3200, docPromptHi || p > 6800
		default:
			t.Fatalf("prompt of %d tokens, outside both modes (64-512, 3,000-7,000)", p)
		}
	}
	if share := float64(doc) / n; math.Abs(share-0.2) > 0.01 {
		t.Errorf("documents are %.3f of requests, want 0.20", share)
	}
	if m := Percentile(chatOut, 50); math.Abs(m-144) > 8 {
		t.Errorf("chat turns' median output %v tokens, want ~144 (uniform 32-256)", m)
	}
	if m := Percentile(docPrompt, 50); math.Abs(m-5000) > 150 {
		t.Errorf("documents' median prompt %v tokens, want ~5,000 (uniform 3,000-7,000)", m)
	}
	if !chatPromptLo || !chatPromptHi || !chatOutHi || !docPromptLo || !docPromptHi {
		t.Errorf("a mode's range is not covered (chat prompt low %v high %v, output high %v; document prompt low %v high %v)",
			chatPromptLo, chatPromptHi, chatOutHi, docPromptLo, docPromptHi)
	}
	// The built requests carry exactly the drawn sizes, and a seed fixes them.
	reqs := w.Build(make([]time.Duration, 200), nil, 3)
	for i, r := range reqs {
		if len(r.Prompt) != r.PromptTokens*vllmsim.BytesPerToken {
			t.Fatalf("request %d: prompt of %d bytes for %d tokens", i, len(r.Prompt), r.PromptTokens)
		}
		if r.PromptTokens > 512 && r.PromptTokens < 3000 {
			t.Fatalf("request %d: prompt of %d tokens, between the modes", i, r.PromptTokens)
		}
	}
	if again := w.Build(make([]time.Duration, 200), nil, 3); !slices.Equal(reqs, again) {
		t.Error("the same seed built different requests")
	}
	if other := w.Build(make([]time.Duration, 200), nil, 4); slices.Equal(reqs, other) {
		t.Error("seeds 3 and 4 built the same requests")
	}
}

// burstCounts counts arrivals inside and outside p's bursts.
func burstCounts(arr []time.Duration, p OnOff) (on, off int) {
	for _, a := range arr {
		if a%p.Period < p.On {
			on++
		} else {
			off++
		}
	}
	return on, off
}

// TestOnOffArrivals checks -arrivals onoff's burst structure: arrivals
// at 3x the mean rate for the first 1.5 s of every 6 s and at 1/3x for the
// rest, the mean rate kept, most bursts denser than the lull after them,
// and a seed fixing the schedule. Poisson arrivals (the mechanism removed)
// put a quarter of the arrivals in the bursts, not three quarters.
func TestOnOffArrivals(t *testing.T) {
	p := BurstOnOff
	const rate = 20.0
	dur := 40 * p.Period
	segs := []Segment{{Rate: rate, Dur: dur}}
	arr := p.Arrivals(segs, rand.New(rand.NewPCG(5, 6)))
	if !slices.IsSorted(arr) || arr[len(arr)-1] >= dur {
		t.Fatal("arrivals not sorted within the schedule")
	}
	if got, want := float64(len(arr)), rate*dur.Seconds(); math.Abs(got-want)/want > 0.05 {
		t.Errorf("%v arrivals, want %v (the mean rate)", got, want)
	}
	on, off := burstCounts(arr, p)
	onTime := dur.Seconds() * float64(p.On) / float64(p.Period)
	onRate, offRate := float64(on)/onTime/rate, float64(off)/(dur.Seconds()-onTime)/rate
	if math.Abs(onRate-3) > 0.2 || math.Abs(offRate-1.0/3) > 0.05 {
		t.Errorf("bursts at %.2fx and lulls at %.2fx the mean rate, want 3x and 0.33x", onRate, offRate)
	}
	// Burst by burst: each 1.5 s burst against the 1.5 s right after it.
	denser := 0
	for k := range 40 {
		b0 := time.Duration(k) * p.Period
		var inBurst, after int
		for _, a := range arr {
			switch {
			case a >= b0 && a < b0+p.On:
				inBurst++
			case a >= b0+p.On && a < b0+2*p.On:
				after++
			}
		}
		if inBurst > after {
			denser++
		}
	}
	if denser < 36 {
		t.Errorf("%d of 40 bursts denser than the lull after them, want nearly all", denser)
	}
	if again := p.Arrivals(segs, rand.New(rand.NewPCG(5, 6))); !slices.Equal(arr, again) {
		t.Error("the same seed drew a different schedule")
	}
}

// TestWorkloadFlagsReachTheScenarios checks that -sizes bimodal,
// -arrivals onoff and -fleet reach the steady and replicas entries: their
// requests are bimodal, their arrivals come in bursts, a oneslow fleet's
// last server is 2x slower and its rate is a share of the fleet's own
// capacity; and that the Poisson default is unchanged.
func TestWorkloadFlagsReachTheScenarios(t *testing.T) {
	o := &Options{Sizes: SizesBimodal, Arrivals: ArrivalsOnOff, Fleet: FleetOneSlow, Servers: 8, Duration: 60 * time.Second}
	vs := variants("replicas", o, 20)
	if len(vs) != 3 {
		t.Fatalf("%d replicas entries", len(vs))
	}
	v := vs[0]
	if f := v.setup.Faults[7]; f.Slowdown != 2 || len(v.setup.Faults) != 1 {
		t.Errorf("oneslow fleet's faults %+v, want server 7 at slowdown 2", v.setup.Faults)
	}
	if want := 0.85 * 20 * 7.5 / 8; math.Abs(v.segs[0].Rate-want) > 1e-9 {
		t.Errorf("rate %v, want %v (0.85 x capacity x 7.5/8)", v.segs[0].Rate, want)
	}
	reqs := v.build(1)
	var at []time.Duration
	docs := 0
	for _, r := range reqs {
		at = append(at, r.At)
		if r.PromptTokens >= 3000 {
			docs++
		}
		if r.PromptTokens > 512 && r.PromptTokens < 3000 {
			t.Fatalf("prompt of %d tokens between the modes", r.PromptTokens)
		}
	}
	if share := float64(docs) / float64(len(reqs)); share < 0.15 || share > 0.25 {
		t.Errorf("documents %.2f of requests, want ~0.2", share)
	}
	on, off := burstCounts(at, BurstOnOff)
	if frac := float64(on) / float64(on+off); frac < 0.65 || frac > 0.85 {
		t.Errorf("%.2f of arrivals in bursts, want ~0.75 (3x for a quarter of the time)", frac)
	}
	// Steady too; and the default stays Poisson on a homogeneous fleet.
	for _, s := range []string{"steady", "replicas"} {
		for _, v := range variants(s, o, 20) {
			if v.onoff == nil || v.setup.Faults == nil {
				t.Errorf("%s: -arrivals or -fleet not applied", v.name)
			}
		}
		for _, v := range variants(s, &Options{Sizes: SizesBimodal, Servers: 8, Duration: 60 * time.Second}, 20) {
			if v.onoff != nil || v.setup.Faults != nil {
				t.Errorf("%s: onoff or faults without the flags", v.name)
			}
			on, off := burstCounts(func() (a []time.Duration) {
				for _, r := range v.build(1) {
					a = append(a, r.At)
				}
				return a
			}(), BurstOnOff)
			if frac := float64(on) / float64(on+off); frac > 0.35 {
				t.Errorf("%s: %.2f of Poisson arrivals in the burst windows, want ~0.25", v.name, frac)
			}
		}
	}
	if err := checkArrivals(ArrivalsOnOff, 0.5); err == nil {
		t.Error("-arrivals onoff with -burstiness 0.5 accepted")
	}
	if err := checkArrivals("bursty", 1); err == nil {
		t.Error("unknown -arrivals accepted")
	}
	if _, _, err := fleetFaults("hetero2", 8); err == nil {
		t.Error("unknown -fleet accepted")
	}
	if _, share, _ := fleetFaults(FleetTwoSpeed, 8); share != 0.75 {
		t.Errorf("twospeed share %v, want 0.75", share)
	}
}

// TestCapacityFlagFixesTheRates checks -capacity: the run uses the given
// capacity for its sizes instead of measuring it, so the offered rate is
// load x capacity in every invocation. With the flag ignored the bench
// measures this 2-server fleet (tens of requests/s, not 4).
func TestCapacityFlagFixesTheRates(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a small fleet")
	}
	o := Options{Scenario: "steady", Variants: []string{"steady_50"}, Strategies: []string{RoundRobin}, Servers: 2,
		Sizes: SizesUniform, Capacity: 4, Seeds: 1, Duration: time.Second, Out: t.TempDir(), NoPlots: true}
	res, err := Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Fleet.CapacityRPS != 4 || res.Fleet.CapacityBySizes[SizesUniform] != 4 {
		t.Errorf("capacity %v (%v), want 4 from -capacity", res.Fleet.CapacityRPS, res.Fleet.CapacityBySizes)
	}
	if got := res.Scenarios[0].Params["offered_rps"]; got != 2.0 {
		t.Errorf("steady_50 offered %v req/s, want 2 (0.5 x 4)", got)
	}
	if _, err := Run(t.Context(), Options{Scenario: "steady", Capacity: -1, Out: t.TempDir()}); err == nil {
		t.Error("-capacity -1 accepted")
	}
}
