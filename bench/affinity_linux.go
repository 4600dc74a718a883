//go:build linux

package bench

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// maxCPUs is how many CPUs a unix.CPUSet holds (the kernel's cpu_set_t).
const maxCPUs = int(unsafe.Sizeof(unix.CPUSet{})) * 8

// maskOf is the kernel's CPU set of cpus.
func maskOf(cpus []int) (unix.CPUSet, error) {
	var m unix.CPUSet
	for _, c := range cpus {
		if c < 0 || c >= maxCPUs {
			return m, errors.New("cpu " + strconv.Itoa(c) + " out of range")
		}
		m.Set(c)
	}
	return m, nil
}

// setAffinity restricts thread tid (0: the calling thread) to cpus.
func setAffinity(tid int, cpus []int) error {
	m, err := maskOf(cpus)
	if err != nil {
		return err
	}
	if err := unix.SchedSetaffinity(tid, &m); err != nil {
		return os.NewSyscallError("sched_setaffinity", err)
	}
	return nil
}

// affinity returns the CPUs thread tid (0: the calling thread; a process
// id names its main thread) may run on, in increasing order.
func affinity(tid int) ([]int, error) {
	var m unix.CPUSet
	if err := unix.SchedGetaffinity(tid, &m); err != nil {
		return nil, os.NewSyscallError("sched_getaffinity", err)
	}
	var cpus []int
	for c := range maxCPUs {
		if m.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// threads lists the thread ids of process pid.
func threads(pid int) ([]int, error) {
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return nil, err
	}
	tids := make([]int, 0, len(ents))
	for _, e := range ents {
		if t, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, t)
		}
	}
	return tids, nil
}

// pinProcess restricts every thread of process pid to cpus. A thread
// started meanwhile by a thread not yet pinned would keep the old mask, so
// the threads are listed again until all of them carry it.
func pinProcess(pid int, cpus []int) error {
	for range 10 {
		tids, err := threads(pid)
		if err != nil {
			return err
		}
		changed := false
		for _, t := range tids {
			got, err := affinity(t)
			if err != nil {
				continue // the thread exited
			}
			if slices.Equal(got, cpus) {
				continue
			}
			if err := setAffinity(t, cpus); err != nil && !errors.Is(err, syscall.ESRCH) {
				return err
			}
			changed = true
		}
		if !changed {
			return nil
		}
	}
	return errors.New("threads kept appearing with another CPU mask")
}

// startPinned starts cmd with its CPU mask set to cpus from its first
// instruction (a child inherits the mask of the thread that forks it, so
// it is forked from a thread pinned for that alone, which then exits): a
// process that forks workers or sizes itself by its CPUs at start (nginx,
// HAProxy, the Go runtime's GOMAXPROCS) sees the mask already.
func startPinned(cmd *exec.Cmd, cpus []int) error {
	if len(cpus) == 0 {
		return cmd.Start()
	}
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends with this goroutine, its mask
		// with it.
		runtime.LockOSThread()
		if err := setAffinity(0, cpus); err != nil {
			errc <- err
			return
		}
		errc <- cmd.Start()
	}()
	return <-errc
}
