package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Where the CPU went during one open-loop run: the target, the generator,
// the upstreams and everything else on the machine, and how long each
// side's threads stood runnable without a CPU. The 10k req/s latency goal
// is only meaningful when the machine had CPU to spare: these figures say
// whether it had, and who queued.

// schedTimes are the scheduler's totals for a set of threads, read from
// /proc/PID/task/TID/schedstat (nanoseconds): time on a CPU and time
// runnable, waiting on a run queue.
type schedTimes struct {
	cpu, wait time.Duration
}

func (a schedTimes) minus(b schedTimes) schedTimes {
	return schedTimes{cpu: a.cpu - b.cpu, wait: a.wait - b.wait}
}

// taskSched adds the schedstat of every thread of process dir
// (/proc/PID or /proc/self) to t. Threads that exited are gone from the
// count; Go's threads rarely exit.
func taskSched(dir string, t *schedTimes) {
	tasks, _ := filepath.Glob(filepath.Join(dir, "task", "[0-9]*", "schedstat"))
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			continue
		}
		run, _ := strconv.ParseInt(f[0], 10, 64)
		wait, _ := strconv.ParseInt(f[1], 10, 64)
		t.cpu += time.Duration(run)
		t.wait += time.Duration(wait)
	}
}

// groupSched returns the scheduler totals of every thread of the live
// processes of process group pgid (0: none).
func groupSched(pgid int) schedTimes {
	var t schedTimes
	eachGroupProc(pgid, func(dir string, _ []string) { taskSched(dir, &t) })
	return t
}

// selfSched returns the scheduler totals of this process's threads.
func selfSched() schedTimes {
	var t schedTimes
	taskSched("/proc/self", &t)
	return t
}

// machineTimes are the machine's CPU times summed over all CPUs, from the
// first line of /proc/stat: busy (user, nice, system, irq, softirq), idle
// (idle, iowait) and steal (taken by the hypervisor).
type machineTimes struct {
	busy, idle, steal time.Duration
}

func readMachineTimes() machineTimes {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineTimes{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return parseProcStat(line)
}

// parseProcStat parses /proc/stat's "cpu ..." line (USER_HZ ticks).
func parseProcStat(line string) machineTimes {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return machineTimes{}
	}
	v := func(i int) time.Duration {
		n, _ := strconv.ParseInt(f[i], 10, 64)
		return time.Duration(n) * clockTick
	}
	return machineTimes{
		busy:  v(1) + v(2) + v(3) + v(6) + v(7),
		idle:  v(4) + v(5),
		steal: v(8),
	}
}

// cpuSnap is one reading of everything cpuShare compares.
type cpuSnap struct {
	at        time.Time
	target    schedTimes
	self      schedTimes
	upstreams schedTimes
	machine   machineTimes
}

// takeCPUSnap reads the target's process group (0: no target), this
// process and the upstream children's groups, and the machine.
func takeCPUSnap(target int, upstreams []int) cpuSnap {
	s := cpuSnap{at: time.Now(), target: groupSched(target), self: selfSched(), machine: readMachineTimes()}
	for _, u := range upstreams {
		t := groupSched(u)
		s.upstreams.cpu += t.cpu
		s.upstreams.wait += t.wait
	}
	return s
}

// CPUShare says where the machine's CPU went during one run, per request
// sent (µs) and in CPUs (cores busy on average).
type CPUShare struct {
	// TargetWaitUsPerReq is the time the target's threads stood runnable
	// without a CPU (run-queue wait, /proc schedstat), per request: the
	// OS scheduler's latency, which no proxy code can shorten.
	TargetWaitUsPerReq float64 `json:"target_runqueue_wait_us_per_req"`
	// GeneratorCPUusPerReq is this process's CPU per request: vegeta,
	// and the two upstreams too when they run in this process (see
	// OverheadResult.Upstream).
	GeneratorCPUusPerReq  float64 `json:"generator_cpu_us_per_req"`
	GeneratorWaitUsPerReq float64 `json:"generator_runqueue_wait_us_per_req"`
	// UpstreamCPUusPerReq is the upstream children's CPU per request
	// (0 when the upstreams run in this process).
	UpstreamCPUusPerReq float64 `json:"upstream_cpu_us_per_req,omitempty"`
	// Cores used on average: the target, this process, the upstream
	// children, everything else on the machine (other people's work,
	// the kernel's own threads), and the machine's CPUs in total.
	TargetCores    float64 `json:"target_cores"`
	GeneratorCores float64 `json:"generator_cores"`
	UpstreamCores  float64 `json:"upstream_cores,omitempty"`
	OtherCores     float64 `json:"other_cores"`
	BusyCores      float64 `json:"busy_cores"`
	StealCores     float64 `json:"steal_cores,omitempty"`
	CPUs           int     `json:"cpus"`
}

// share computes the CPUShare between two snapshots for n requests.
func share(a, b cpuSnap, n uint64, cpus int) CPUShare {
	wall := b.at.Sub(a.at).Seconds()
	if wall <= 0 || n == 0 {
		return CPUShare{}
	}
	t, g, u := b.target.minus(a.target), b.self.minus(a.self), b.upstreams.minus(a.upstreams)
	busy := b.machine.busy - a.machine.busy
	per := func(d time.Duration) float64 { return round3(float64(d.Microseconds()) / float64(n)) }
	cores := func(d time.Duration) float64 { return round3(d.Seconds() / wall) }
	return CPUShare{
		TargetWaitUsPerReq:    per(t.wait),
		GeneratorCPUusPerReq:  per(g.cpu),
		GeneratorWaitUsPerReq: per(g.wait),
		UpstreamCPUusPerReq:   per(u.cpu),
		TargetCores:           cores(t.cpu),
		GeneratorCores:        cores(g.cpu),
		UpstreamCores:         cores(u.cpu),
		OtherCores:            round3(max(0, cores(busy)-cores(t.cpu)-cores(g.cpu)-cores(u.cpu))),
		BusyCores:             cores(busy),
		StealCores:            cores(b.machine.steal - a.machine.steal),
		CPUs:                  cpus,
	}
}

// String is the log line's summary of s ("" for nil).
func (s *CPUShare) String() string {
	if s == nil {
		return ""
	}
	return fmt.Sprintf(", cores target %.2f generator %.2f upstreams %.2f other %.2f busy %.2f/%d, run-queue wait us/req target %.1f generator %.1f",
		s.TargetCores, s.GeneratorCores, s.UpstreamCores, s.OtherCores, s.BusyCores, s.CPUs, s.TargetWaitUsPerReq, s.GeneratorWaitUsPerReq)
}

// medianShare is the median of the runs' shares, figure by figure, over
// the runs that have one (nil when none has).
func medianShare(vs []VegetaRun) *CPUShare {
	var ss []*CPUShare
	for i := range vs {
		if vs[i].Share != nil {
			ss = append(ss, vs[i].Share)
		}
	}
	if len(ss) == 0 {
		return nil
	}
	m := func(f func(*CPUShare) float64) float64 {
		xs := make([]float64, len(ss))
		for i, s := range ss {
			xs[i] = f(s)
		}
		return median(xs)
	}
	return &CPUShare{
		TargetWaitUsPerReq:    m(func(s *CPUShare) float64 { return s.TargetWaitUsPerReq }),
		GeneratorCPUusPerReq:  m(func(s *CPUShare) float64 { return s.GeneratorCPUusPerReq }),
		GeneratorWaitUsPerReq: m(func(s *CPUShare) float64 { return s.GeneratorWaitUsPerReq }),
		UpstreamCPUusPerReq:   m(func(s *CPUShare) float64 { return s.UpstreamCPUusPerReq }),
		TargetCores:           m(func(s *CPUShare) float64 { return s.TargetCores }),
		GeneratorCores:        m(func(s *CPUShare) float64 { return s.GeneratorCores }),
		UpstreamCores:         m(func(s *CPUShare) float64 { return s.UpstreamCores }),
		OtherCores:            m(func(s *CPUShare) float64 { return s.OtherCores }),
		BusyCores:             m(func(s *CPUShare) float64 { return s.BusyCores }),
		StealCores:            m(func(s *CPUShare) float64 { return s.StealCores }),
		CPUs:                  ss[0].CPUs,
	}
}
