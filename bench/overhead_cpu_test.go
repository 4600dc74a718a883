package bench

import (
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	// user nice system idle iowait irq softirq steal guest guest_nice
	m := parseProcStat("cpu  100 5 50 800 20 3 7 15 0 0")
	want := machineTimes{busy: 165 * clockTick, idle: 820 * clockTick, steal: 15 * clockTick}
	if m != want {
		t.Fatalf("parseProcStat = %+v, want %+v", m, want)
	}
	if m := parseProcStat("cpu0 1 2 3 4 5 6 7 8"); m != (machineTimes{}) {
		t.Fatalf("a per-CPU line parsed as the total: %+v", m)
	}
}

// share turns two readings into cores and per-request figures: over 2 s
// and 10,000 requests, a target that used 1 s of CPU and waited 0.2 s ran
// 0.5 cores and waited 20 µs per request; what the machine was busy with
// beyond the target, the generator and the upstreams is the others'.
func TestShare(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a := cpuSnap{at: t0}
	b := cpuSnap{
		at:        t0.Add(2 * time.Second),
		target:    schedTimes{cpu: time.Second, wait: 200 * time.Millisecond},
		self:      schedTimes{cpu: 1500 * time.Millisecond, wait: 100 * time.Millisecond},
		upstreams: schedTimes{cpu: 400 * time.Millisecond},
		machine:   machineTimes{busy: 3600 * time.Millisecond, idle: 400 * time.Millisecond, steal: 100 * time.Millisecond},
	}
	got := share(a, b, 10000, 2)
	want := CPUShare{
		TargetWaitUsPerReq: 20, GeneratorCPUusPerReq: 150, GeneratorWaitUsPerReq: 10, UpstreamCPUusPerReq: 40,
		TargetCores: 0.5, GeneratorCores: 0.75, UpstreamCores: 0.2, OtherCores: 0.35, BusyCores: 1.8, StealCores: 0.05, CPUs: 2,
	}
	if got != want {
		t.Fatalf("share =\n%+v, want\n%+v", got, want)
	}
	if s := share(a, a, 10000, 2); s != (CPUShare{}) {
		t.Fatalf("no time passed: %+v", s)
	}
	rep := vegetaReport(&OverheadResult{Targets: []OverheadTarget{{Name: "probegate_probe", Vegeta: []VegetaRun{{Rate: 10000, Share: &got}}}}})
	if !strings.Contains(rep, "| probegate_probe | - | - | 0.50 / 0.75 / 0.20 / 0.35 = 1.80 of 2; wait 20.0 | - |") {
		t.Fatalf("report lacks the CPU share row:\n%s", rep)
	}
	// A median over rounds keeps the share.
	m := medianVegeta([]VegetaRun{{Rate: 10000, Share: &got}, {Rate: 10000}, {Rate: 10000, Share: &got}})
	if m.Share == nil || *m.Share != got {
		t.Fatalf("median share = %+v", m.Share)
	}
}

// The scheduler totals and the stat CPU times come from every thread of a
// process group and of this process: a spinning child shows its CPU as it
// runs.
func TestGroupSched(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc schedstat is Linux's")
	}
	cmd := exec.Command("sh", "-c", "while :; do :; done")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Skip("no sh:", err)
	}
	pgid := cmd.Process.Pid
	var last schedTimes
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && last.cpu < 100*time.Millisecond; time.Sleep(20 * time.Millisecond) {
		last = groupSched(pgid)
	}
	// /proc/PID/stat's utime+stime (clock ticks) agree with schedstat.
	var ticks time.Duration
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && ticks < 100*time.Millisecond; time.Sleep(20 * time.Millisecond) {
		ticks = groupCPU(pgid)
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	_ = cmd.Wait()
	if last.cpu < 100*time.Millisecond {
		t.Fatalf("the spinning group used %v of CPU by schedstat, want >= 100ms", last.cpu)
	}
	if ticks < 100*time.Millisecond {
		t.Fatalf("the spinning group used %v of CPU by /proc/PID/stat, want >= 100ms", ticks)
	}
	if groupSched(0) != (schedTimes{}) || groupCPU(0) != 0 {
		t.Fatal("process group 0 counted")
	}
	if s := selfSched(); s.cpu <= 0 {
		t.Fatalf("this process's schedstat: %+v", s)
	}
	if m := readMachineTimes(); m.busy <= 0 || m.idle < 0 {
		t.Fatalf("/proc/stat: %+v", m)
	}
}
