package bench

import (
	"fmt"
	"os"
)

// PinInfo records how the overhead scenario placed its processes with
// -pin: the load generators (this process: the Go generator and vegeta's
// attacker; and wrk, started from it) on GeneratorCPUs, every target (the
// proxy under test, nginx, HAProxy or probegate, and the two fast
// upstreams, then run as child processes) on TargetCPUs. Every target gets
// the same placement.
type PinInfo struct {
	GeneratorCPUs []int `json:"generator_cpus"`
	TargetCPUs    []int `json:"target_cpus"`
}

// planPin splits the CPUs this process may run on: the first for the
// generators, the rest for the targets. It needs two.
func planPin() (*PinInfo, error) {
	cpus, err := affinity(0) // errNoAffinity where pinning cannot work
	if err != nil {
		return nil, err
	}
	if len(cpus) < 2 {
		return nil, fmt.Errorf("pinning needs 2 CPUs, this process may use %d (%v)", len(cpus), cpus)
	}
	return &PinInfo{GeneratorCPUs: cpus[:1], TargetCPUs: cpus[1:]}, nil
}

// pinSelf moves every thread of this process to cpus and returns a func
// that moves them back to the mask they had.
func pinSelf(cpus []int) (restore func(), err error) {
	old, err := affinity(0)
	if err != nil {
		return nil, err
	}
	if err := pinProcess(os.Getpid(), cpus); err != nil {
		_ = pinProcess(os.Getpid(), old)
		return nil, err
	}
	return func() { _ = pinProcess(os.Getpid(), old) }, nil
}
