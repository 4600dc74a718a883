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
)

// cpuMask is the kernel's cpu_set_t for up to 1,024 CPUs.
type cpuMask [16]uint64

func maskOf(cpus []int) (cpuMask, error) {
	var m cpuMask
	for _, c := range cpus {
		if c < 0 || c >= 64*len(m) {
			return m, errors.New("cpu " + strconv.Itoa(c) + " out of range")
		}
		m[c/64] |= 1 << (c % 64)
	}
	return m, nil
}

// setAffinity restricts thread tid (0: the calling thread) to cpus.
func setAffinity(tid int, cpus []int) error {
	m, err := maskOf(cpus)
	if err != nil {
		return err
	}
	_, _, e := syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, uintptr(tid), unsafe.Sizeof(m), uintptr(unsafe.Pointer(&m)))
	if e != 0 {
		return os.NewSyscallError("sched_setaffinity", e)
	}
	return nil
}

// affinity returns the CPUs thread tid (0: the calling thread; a process
// id names its main thread) may run on, in increasing order.
func affinity(tid int) ([]int, error) {
	var m cpuMask
	_, _, e := syscall.RawSyscall(syscall.SYS_SCHED_GETAFFINITY, uintptr(tid), unsafe.Sizeof(m), uintptr(unsafe.Pointer(&m)))
	if e != 0 {
		return nil, os.NewSyscallError("sched_getaffinity", e)
	}
	var cpus []int
	for i, w := range m {
		for b := range 64 {
			if w&(1<<b) != 0 {
				cpus = append(cpus, 64*i+b)
			}
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
