package bench

import "fmt"

// A latency at a fixed rate says something about a proxy only if the
// machine could carry the load without it: on a small machine the
// generator and the upstreams share the CPUs with the target, and when they
// alone queue, every target's tail is theirs. direct (no proxy) shows it:
// its p99 at a rate far above its own p99 at the lowest rate means the
// generator itself queued there, and no verdict is drawn from that rate.
const (
	// queuedFactor is how many times its floor (p99 at the lowest rate)
	// direct's p99 may reach before the generator is said to have queued.
	queuedFactor = 4
	// queuedMinMs is a p99 below which direct is never said to have
	// queued, whatever its floor: a sub-millisecond floor moves by several
	// times without any queueing.
	queuedMinMs = 5
)

// generatorQueued reports whether direct's open-loop run at rate shows the
// generator queued (see queuedFactor), and if so says so with the figures,
// as "direct's p99 97.3 ms at 10k req/s against 1.24 ms at 2k". It is
// false when direct did not run at rate or at the lowest rate.
func generatorQueued(direct *OverheadTarget, rate int) (bool, string) {
	if direct == nil || len(VegetaRates) == 0 || rate == VegetaRates[0] {
		return false, ""
	}
	lo, at := direct.vegetaAt(VegetaRates[0]), direct.vegetaAt(rate)
	if lo == nil || at == nil || lo.Latency.P99 <= 0 {
		return false, ""
	}
	floor, p99 := lo.Latency.P99, at.Latency.P99
	if p99 <= queuedMinMs || p99 <= queuedFactor*floor {
		return false, ""
	}
	return true, fmt.Sprintf("direct's p99 %.2f ms at %dk req/s against %.2f ms at %dk", p99, rate/1000, floor, VegetaRates[0]/1000)
}

// saturationReport renders, under the open-loop tables, the rates at which
// the generator queued (nothing when it never did).
func saturationReport(o *OverheadResult) string {
	direct := o.target("direct")
	var s string
	for _, rate := range VegetaRates {
		if q, why := generatorQueued(direct, rate); q {
			s += fmt.Sprintf("\n> The generator queued at %dk req/s: %s (more than %dx its floor): the machine could not carry that rate even without a proxy, so every target's latency there is partly the generator's and upstreams' own queueing; the bench draws no verdict from it.\n", rate/1000, why, queuedFactor)
		}
	}
	return s
}
