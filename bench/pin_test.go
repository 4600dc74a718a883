package bench

import (
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestPlanPin: with two CPUs or more, -pin gives the generators the first
// and the targets the rest; elsewhere it says why it cannot pin.
func TestPlanPin(t *testing.T) {
	plan, err := planPin()
	if runtime.GOOS != "linux" {
		if err == nil {
			t.Fatalf("planned %+v on %s, which has no sched_setaffinity", plan, runtime.GOOS)
		}
		t.Skipf("pinning is Linux-only; on %s: %v", runtime.GOOS, err)
	}
	cpus, aerr := affinity(0)
	if aerr != nil {
		t.Fatal(aerr)
	}
	if len(cpus) < 2 {
		if err == nil {
			t.Fatalf("planned %+v with one CPU", plan)
		}
		t.Skipf("needs 2 CPUs, this test may use %v", cpus)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(plan.GeneratorCPUs, cpus[:1]) || !slices.Equal(plan.TargetCPUs, cpus[1:]) {
		t.Fatalf("plan %+v from CPUs %v", plan, cpus)
	}
}

// pinPlanOrSkip returns the plan or skips the test, saying why.
func pinPlanOrSkip(t *testing.T) *PinInfo {
	t.Helper()
	plan, err := planPin()
	if err != nil {
		t.Skipf("no pinning here: %v", err)
	}
	return plan
}

// TestStartPinned: a target starts with the targets' CPU mask from its
// first instruction, whatever the mask of the process starting it.
func TestStartPinned(t *testing.T) {
	plan := pinPlanOrSkip(t)
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep command to start")
	}
	cmd := exec.Command(sleep, "10")
	if err := startPinned(cmd, plan.TargetCPUs); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	got, err := affinity(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, plan.TargetCPUs) {
		t.Fatalf("the target runs on CPUs %v, want %v", got, plan.TargetCPUs)
	}
	// This process kept its own mask.
	if self, _ := affinity(0); slices.Equal(self, plan.TargetCPUs) {
		t.Fatalf("starting a pinned target pinned this thread too: %v", self)
	}
}

// TestPinSelf: pinned, every thread of this process (vegeta's attacker and
// the Go generator run here) is on the generators' CPU, and so is a
// process it starts plainly (wrk); restore gives the old mask back.
func TestPinSelf(t *testing.T) {
	plan := pinPlanOrSkip(t)
	before, err := affinity(0)
	if err != nil {
		t.Fatal(err)
	}
	restore, err := pinSelf(plan.GeneratorCPUs)
	if err != nil {
		t.Fatal(err)
	}
	tids, err := threads(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for _, tid := range tids {
		if got, err := affinity(tid); err == nil && !slices.Equal(got, plan.GeneratorCPUs) {
			restore()
			t.Fatalf("thread %d on CPUs %v, want %v", tid, got, plan.GeneratorCPUs)
		}
	}
	if sleep, err := exec.LookPath("sleep"); err == nil {
		cmd := exec.Command(sleep, "10")
		if err := cmd.Start(); err != nil {
			restore()
			t.Fatal(err)
		}
		got, _ := affinity(cmd.Process.Pid)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if !slices.Equal(got, plan.GeneratorCPUs) {
			restore()
			t.Fatalf("a generator started by the pinned process runs on %v, want %v", got, plan.GeneratorCPUs)
		}
	}
	restore()
	tids, _ = threads(os.Getpid())
	for _, tid := range tids {
		if got, err := affinity(tid); err == nil && !slices.Equal(got, before) {
			t.Fatalf("after restore, thread %d on CPUs %v, want %v", tid, got, before)
		}
	}
}

// TestOverheadReportSaysPinned: report.md says where the processes ran.
func TestOverheadReportSaysPinned(t *testing.T) {
	r := overheadReport(&OverheadResult{Pin: &PinInfo{GeneratorCPUs: []int{0}, TargetCPUs: []int{1}}})
	if !strings.Contains(r, "Pinned (`-pin`): the load generators (wrk, vegeta, the Go generator) on CPU [0], each target and its two upstreams (child processes) on CPU [1]") {
		t.Fatalf("no placement line:\n%s", r)
	}
	if r := overheadReport(&OverheadResult{}); !strings.Contains(r, "Not pinned") {
		t.Fatalf("an unpinned report does not say so:\n%s", r)
	}
}
