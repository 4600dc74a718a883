//go:build !linux

package bench

import (
	"errors"
	"os/exec"
)

var errNoAffinity = errors.New("CPU pinning needs Linux's sched_setaffinity")

func affinity(int) ([]int, error) { return nil, errNoAffinity }
func pinProcess(int, []int) error { return errNoAffinity }
func threads(int) ([]int, error)  { return nil, errNoAffinity }
func startPinned(cmd *exec.Cmd, cpus []int) error {
	if len(cpus) > 0 {
		return errNoAffinity
	}
	return cmd.Start()
}
