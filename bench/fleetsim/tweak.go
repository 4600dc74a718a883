package fleetsim

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/probegate/probegate/internal/config"
)

// Configuration tweaks of a strategy, for sweeps of one route.load or scrape key
// without a bench strategy per value: a strategy name may end in
// "+key=value" parts (probe+dw=2), each applied to the strategy's
// production configuration (bench.StrategyConfig) before its replicas are
// built. Keys:
//
//	dw    route.load.decode_weight
//	rw    route.load.running_weight
//	ww    route.load.waiting_weight
//	pss   route.load.pod_speed_samples
//	psf   route.load.pod_speed_foreign
//	sw    route.load.seat_weight
//	pf    route.load.pod_speed_fresh (0: false, else true)
//	fc    scrape.foreign_change
//	fb    scrape.foreign_budget
//	sf    route.load.seat_free_share
type tweak struct {
	key string
	val float64
}

// splitTweaks strips the "+key=value" parts from strategy.
func splitTweaks(strategy string) (string, []tweak, error) {
	parts := strings.Split(strategy, "+")
	var out []tweak
	for _, p := range parts[1:] {
		k, v, ok := strings.Cut(p, "=")
		f, err := strconv.ParseFloat(v, 64)
		if !ok || err != nil {
			return "", nil, fmt.Errorf("strategy %q: tweak %q is not key=number", strategy, p)
		}
		switch k {
		case "dw", "rw", "ww", "pss", "psf", "sw", "pf", "fc", "fb", "sf":
		default:
			return "", nil, fmt.Errorf("strategy %q: unknown tweak key %q", strategy, k)
		}
		out = append(out, tweak{k, f})
	}
	return parts[0], out, nil
}

// applyTweaks sets ts on cfg.
func applyTweaks(cfg *config.Config, ts []tweak) error {
	for _, t := range ts {
		l := &cfg.Route.Load
		switch t.key {
		case "dw":
			l.DecodeWeight = t.val
		case "rw":
			l.RunningWeight = t.val
		case "ww":
			l.WaitingWeight = t.val
		case "pss":
			l.PodSpeedSamples = t.val
		case "psf":
			l.PodSpeedForeign = t.val
		case "sw":
			l.SeatWeight = t.val
		case "pf":
			l.PodSpeedFresh = t.val != 0
		case "fc":
			cfg.Scrape.ForeignChange = t.val
		case "fb":
			cfg.Scrape.ForeignBudget = t.val
		case "sf":
			l.SeatFreeShare = t.val
		}
	}
	return cfg.Validate()
}
