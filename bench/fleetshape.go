package bench

import (
	"fmt"
	"strings"

	"github.com/probegate/probegate/internal/vllmsim"
)

// Fleet kinds of -fleet: the servers of the steady, spike and replicas
// scenarios, named and shaped as fleetsim -general's fleets so that a live
// cell and a simulated one are the same fleet.
const (
	// FleetHomo: every server alike (the default, the bench's fleet before
	// -fleet existed).
	FleetHomo = "homo"
	// FleetOneSlow: the last server's engine steps take 2x as long.
	FleetOneSlow = "oneslow"
	// FleetTwoSpeed: the second half of the servers 2x slower.
	FleetTwoSpeed = "twospeed"
)

// FleetKinds lists the accepted -fleet values.
var FleetKinds = []string{FleetHomo, FleetOneSlow, FleetTwoSpeed}

// fleetSlowdown is how much slower a slow server of a -fleet kind is.
const fleetSlowdown = 2.0

// fleetFaults returns the per-server faults of a fleet of kind with n
// servers (nil for FleetHomo) and the fleet's capacity as a share of n
// normal servers': the sum of 1/slowdown over the servers, over n. A
// server slowed down s x serves 1/s of a normal one's requests (every
// engine step lasts s x), so the scenarios scale the capacity measured on
// a homogeneous fleet by that share and a load is a share of this fleet's
// own capacity, as in fleetsim -general (which measures each pod kind).
func fleetFaults(kind string, n int) (map[int]vllmsim.Faults, float64, error) {
	slow := 0
	switch kind {
	case "", FleetHomo:
		return nil, 1, nil
	case FleetOneSlow:
		slow = 1
	case FleetTwoSpeed:
		slow = n - n/2
	default:
		return nil, 0, fmt.Errorf("unknown -fleet %q (have %s)", kind, strings.Join(FleetKinds, ", "))
	}
	slow = min(slow, n)
	f := map[int]vllmsim.Faults{}
	for i := n - slow; i < n; i++ {
		f[i] = vllmsim.Faults{Slowdown: fleetSlowdown}
	}
	share := (float64(n-slow) + float64(slow)/fleetSlowdown) / float64(n)
	return f, share, nil
}
