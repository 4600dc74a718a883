package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// OverheadOptions configure the overhead scenario.
type OverheadOptions struct {
	Quick    bool
	Log      func(string, ...any)
	Progress *Progress
	// Streams is the number of idle streams for the RSS measurement
	// (default 10,000).
	Streams int
	// ProfileDir, when set, receives a CPU and an allocation profile of
	// each probegate target taken while wrk loads it
	// (TARGET.cpu.pprof, TARGET.allocs.pprof).
	ProfileDir string
	// Repeat is the number of rounds (0 or 1: one). Each round measures
	// every target once, in turn, the order reversed every other round, so
	// that drift on a shared machine reaches every target alike; each
	// target then reports the median of its rounds (see medianOfRounds).
	Repeat int
	// Pin places the load generators on one CPU and each target with its
	// upstreams on the others (see PinInfo); the upstreams then run as
	// child processes. Where that is impossible the run goes on unpinned
	// and says why in Skipped.
	Pin bool
}

// OverheadResult is the overhead scenario: a fast upstream behind each
// proxy, loaded with wrk and with the Go generator at fixed concurrency.
type OverheadResult struct {
	Concurrency int              `json:"concurrency"`
	DurationS   float64          `json:"duration_s"`
	Targets     []OverheadTarget `json:"targets"`
	Skipped     []string         `json:"skipped,omitempty"`
	// Warnings are conditions of the machine that make the figures less
	// trustworthy (see autogroupNote).
	Warnings []string `json:"warnings,omitempty"`
	// RSS of probegate (least_inflight) holding IdleStreams open streams.
	IdleStreams   int     `json:"idle_streams"`
	RSSIdleMiB    float64 `json:"rss_idle_mib"`
	RSSStreamsMiB float64 `json:"rss_streams_mib"`
	StreamsOpened int     `json:"streams_opened"`
	RSSNote       string  `json:"rss_note,omitempty"`
	Install       string  `json:"install"`
	// Rounds is the number of rounds of a -repeat run (omitted for one):
	// every figure of Targets is then the median of the target's rounds,
	// which each target lists in its own Rounds.
	Rounds int `json:"rounds,omitempty"`
	// Upstream says how the two fast upstreams ran: "" in this process
	// (fasthttp), else as child processes, on Linux raw epoll loops
	// (rawUpstream).
	Upstream string `json:"upstream,omitempty"`
	// Pin is the placement of a -pin run (nil: not pinned; every process
	// may run on every CPU and the upstreams share this process).
	Pin *PinInfo `json:"pin,omitempty"`
}

// OverheadTarget is one target's figures.
type OverheadTarget struct {
	Name       string    `json:"name"`
	WrkRPS     float64   `json:"wrk_rps"`
	WrkLatency Quantiles `json:"wrk_latency_ms"`
	// WrkCPUusPerReq is the proxy's CPU time (user + system, all its
	// processes) per request served under wrk, in microseconds: unlike
	// req/s it does not depend on how much CPU the proxy got on a shared
	// machine.
	WrkCPUusPerReq float64   `json:"wrk_cpu_us_per_req,omitempty"`
	GoRPS          float64   `json:"go_rps"`
	GoLatency      Quantiles `json:"go_latency_ms"`
	GoErrors       int64     `json:"go_errors"`
	VsNginxWrk     float64   `json:"rps_vs_nginx_wrk"`
	VsDirectWrk    float64   `json:"rps_vs_direct_wrk"`
	VsNginxGo      float64   `json:"rps_vs_nginx_go"`
	VsDirectGo     float64   `json:"rps_vs_direct_go"`
	P99VsNginx     float64   `json:"p99_vs_nginx_go"`
	P99VsDirect    float64   `json:"p99_vs_direct_go"`
	Error          string    `json:"error,omitempty"`
	// ProbesPerRequest is, for probegate targets, probes sent (ok, timeout,
	// error, cancelled) per request answered over the wrk and Go generator
	// runs (64 connections, 2 backends); CoalescedPerRequest the requests'
	// joins of a probe already in flight.
	ProbesPerRequest    float64 `json:"probes_per_request,omitempty"`
	CoalescedPerRequest float64 `json:"coalesced_per_request,omitempty"`
	// Vegeta holds the open-loop runs, one per VegetaRates entry.
	Vegeta []VegetaRun `json:"vegeta,omitempty"`
	// Rounds holds, in a run of several rounds, this target's figures in
	// each round (round 1 first; a round whose target did not start has
	// only Error), with its ratios to the same round's nginx and direct.
	// The figures above are then their medians.
	Rounds []OverheadTarget `json:"rounds,omitempty"`
}

func (o *OverheadResult) target(name string) *OverheadTarget {
	if o == nil {
		return nil
	}
	for i := range o.Targets {
		if o.Targets[i].Name == name {
			return &o.Targets[i]
		}
	}
	return nil
}

// BaselineBinEnv names an environment variable: when it holds the path of
// another probegate binary (say, built from an older commit), the overhead
// scenario also measures that build, as targets baseline_least_inflight and
// baseline_probe, in the same run.
const BaselineBinEnv = "PROBEGATE_BENCH_BASELINE_BIN"

// InstallHint says how to get the external baselines.
const InstallHint = "apt-get update && apt-get install -y nginx-light haproxy wrk (Debian/Ubuntu, as root)"

// fastUpstream answers every request at once with a small JSON body (and
// /metrics with a tiny vLLM exposition so probes work). A streaming
// completion gets one SSE frame and is then held open until Close: the idle
// streams of the RSS measurement.
type fastUpstream struct {
	srv  *fasthttp.Server
	ln   net.Listener
	quit chan struct{}
	once sync.Once
}

var (
	fastBody    = []byte(`{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"ok","finish_reason":"length"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	fastMetrics = []byte("vllm:num_requests_running{model_name=\"m\"} 0.0\nvllm:num_requests_waiting{model_name=\"m\"} 0.0\nvllm:kv_cache_usage_perc{model_name=\"m\"} 0.0\n")
	streamKey   = []byte(`"stream":true`)
)

func startFastUpstream() (*fastUpstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u := newFastUpstream(ln)
	go func() { _ = u.srv.Serve(ln) }()
	return u, nil
}

func newFastUpstream(ln net.Listener) *fastUpstream {
	u := &fastUpstream{ln: ln, quit: make(chan struct{})}
	u.srv = &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			switch {
			case string(ctx.Path()) == "/metrics":
				ctx.SetContentType("text/plain; version=0.0.4")
				ctx.SetBody(fastMetrics)
			case bytes.Contains(ctx.PostBody(), streamKey):
				ctx.SetContentType("text/event-stream")
				ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
					_, _ = w.WriteString("data: {\"choices\":[{\"index\":0,\"text\":\"ok\"}]}\n\n")
					_ = w.Flush()
					<-u.quit
				})
			default:
				ctx.SetContentType("application/json")
				ctx.SetBody(fastBody)
			}
		},
		Concurrency:                   1 << 20,
		NoDefaultServerHeader:         true,
		DisableHeaderNamesNormalizing: true,
	}
	return u
}

func (u *fastUpstream) Addr() string { return u.ln.Addr().String() }

func (u *fastUpstream) Close() {
	u.once.Do(func() { close(u.quit) })
	_ = u.srv.Shutdown()
}

// freeAddr returns a loopback address ("127.0.0.1:port") that was free a
// moment ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// child is an external process started by the overhead scenario; Stop
// kills it (and its process group) and always runs.
type child struct {
	name  string
	cmd   *exec.Cmd
	addr  string
	admin string // probegate's admin listener, if any
}

// startChild starts argv in its own process group, restricted to cpus
// (nil: any), with env added to this process's environment, and waits
// until it answers HTTP on addr.
func startChild(ctx context.Context, name, addr string, argv []string, logPath string, cpus []int, env ...string) (*child, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if f, err := os.Create(logPath); err == nil {
		cmd.Stdout, cmd.Stderr = f, f
	}
	if err := startPinned(cmd, cpus); err != nil {
		return nil, err
	}
	c := &child{name: name, cmd: cmd, addr: addr}
	if err := waitHTTP(addr, 10*time.Second); err != nil {
		c.Stop()
		log, _ := os.ReadFile(logPath)
		return nil, fmt.Errorf("%s did not come up on %s: %v: %s", name, addr, err, truncate(string(log), 300))
	}
	return c, nil
}

// pgid returns the child's process group (0 for no child).
func (c *child) pgid() int {
	if c == nil || c.cmd.Process == nil {
		return 0
	}
	return c.cmd.Process.Pid
}

// cpu returns the CPU time used so far by the child's process group (0
// for no child).
func (c *child) cpu() time.Duration {
	if c == nil || c.cmd.Process == nil {
		return 0
	}
	return groupCPU(c.cmd.Process.Pid)
}

func (c *child) Stop() {
	if c == nil || c.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	_ = c.cmd.Wait()
}

// waitHTTP polls addr with a POST until it answers 200.
func waitHTTP(addr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) {
		code, err := fasthttpPost("http://" + addr + "/v1/completions")
		if err == nil && code == 200 {
			return nil
		}
		last = err
		if err == nil {
			last = fmt.Errorf("status %d", code)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return last
}

func fasthttpPost(url string) (int, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(url)
	req.Header.SetMethod("POST")
	err := fasthttp.DoTimeout(req, resp, 500*time.Millisecond)
	return resp.StatusCode(), err
}

const overheadBody = `{"model":"m","prompt":"hello","max_tokens":1}`

// RunOverhead measures proxy overhead on a fast upstream: direct,
// probegate (least_inflight), probegate (probe, d=2), nginx (least_conn)
// and HAProxy (leastconn), with wrk and with the Go generator, then
// probegate's RSS holding 10,000 idle streams. External programs are found
// with exec.LookPath; missing ones are skipped and listed. Every process
// started is killed before it returns.
func RunOverhead(ctx context.Context, o OverheadOptions) (*OverheadResult, error) {
	logf := o.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if o.Streams <= 0 {
		o.Streams = 10000
	}
	raiseNoFile()
	dur, vdur := 8*time.Second, 3*time.Second
	if o.Quick {
		dur, vdur = 3*time.Second, 2*time.Second
	}
	res := &OverheadResult{Concurrency: 64, DurationS: dur.Seconds(), Install: InstallHint}
	tmp, err := os.MkdirTemp("", "probegate-overhead-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)

	var tcpus []int // the targets' CPUs when pinned
	if o.Pin {
		plan, err := planPin()
		var restore func()
		if err == nil {
			restore, err = pinSelf(plan.GeneratorCPUs)
		}
		if err != nil {
			res.Skipped = append(res.Skipped, "pin: "+err.Error()+"; the run is not pinned")
		} else {
			defer restore()
			res.Pin, tcpus = plan, plan.TargetCPUs
		}
	}
	var upAddrs []string
	var upPgids []int // the upstream children's process groups
	if tcpus == nil && !rawUpstreamSupported {
		ups := make([]*fastUpstream, 2)
		for i := range ups {
			if ups[i], err = startFastUpstream(); err != nil {
				return nil, err
			}
			defer ups[i].Close()
		}
		upAddrs = []string{ups[0].Addr(), ups[1].Addr()}
	} else {
		// The upstreams run as child processes of this executable, apart
		// from the generators (pinned: beside the target): on Linux each
		// is the raw epoll loop (rawUpstream), the cheapest on the CPUs the
		// targets share with them.
		for range 2 {
			u, err := startUpstreamChild(ctx, tmp, tcpus, rawUpstreamSupported)
			if err != nil {
				return nil, err
			}
			defer u.Stop()
			upAddrs = append(upAddrs, u.addr)
			upPgids = append(upPgids, u.cmd.Process.Pid)
		}
	}
	if len(upPgids) > 0 {
		res.Upstream = "child processes"
		if rawUpstreamSupported {
			res.Upstream = "raw epoll loops (child processes)"
		}
	}

	wrk, wrkErr := exec.LookPath("wrk")
	if wrkErr != nil {
		res.Skipped = append(res.Skipped, "wrk: not found on PATH, so no closed-loop wrk figures (wrk columns 0, no CPU per request, no wrk goals); the Go generator and vegeta ran. Install: "+InstallHint)
	}
	bin, err := buildProbegate(ctx, tmp)
	if err != nil {
		res.Skipped = append(res.Skipped, "probegate: the binary did not build, so no probegate targets and no RSS figure: "+err.Error())
	}

	type target struct {
		name  string
		start func() (*child, error)
	}
	targets := []target{{name: "direct"}}
	for _, pol := range []string{"least_inflight", "probe"} {
		if bin == "" {
			break
		}
		targets = append(targets, target{name: "probegate_" + pol, start: func() (*child, error) {
			return startProbegate(ctx, bin, tmp, pol, upAddrs, tcpus, false)
		}})
	}
	for _, pol := range []string{"least_inflight", "probe"} {
		if bin == "" || runtime.GOOS != "linux" {
			break
		}
		// server.event_loop on (Linux only): the same policies served on
		// the proxy's event loops (probe's requests are handed over).
		targets = append(targets, target{name: "probegate_" + pol + "_loop", start: func() (*child, error) {
			return startProbegate(ctx, bin, tmp, pol, upAddrs, tcpus, true)
		}})
	}
	if base := os.Getenv(BaselineBinEnv); base != "" {
		// Another build of probegate, measured in the same run (before and
		// after a change, side by side).
		for _, pol := range []string{"least_inflight", "probe"} {
			targets = append(targets, target{name: "baseline_" + pol, start: func() (*child, error) {
				return startProbegate(ctx, base, tmp, pol, upAddrs, tcpus, false)
			}})
		}
	}
	if p, err := exec.LookPath("nginx"); err == nil {
		targets = append(targets, target{name: "nginx", start: func() (*child, error) { return startNginx(ctx, p, tmp, upAddrs, tcpus) }})
	} else {
		res.Skipped = append(res.Skipped, "nginx: not found on PATH, so no nginx row, no ratios to nginx and no goals against it. Install: "+InstallHint)
	}
	if p, err := exec.LookPath("haproxy"); err == nil {
		targets = append(targets, target{name: "haproxy", start: func() (*child, error) { return startHAProxy(ctx, p, tmp, upAddrs, tcpus) }})
	} else {
		res.Skipped = append(res.Skipped, "haproxy: not found on PATH, so no HAProxy row. Install: "+InstallHint)
	}
	for _, s := range res.Skipped {
		logf("overhead: skipped: %s", s)
	}
	if w := autogroupNote(autogroupPath); w != "" {
		res.Warnings = append(res.Warnings, w)
		logf("overhead: warning: %s", w)
	}
	if o.Progress != nil {
		o.Progress.AddRuns(len(targets)*max(o.Repeat, 1) + 1)
	}
	luaPath := filepath.Join(tmp, "post.lua")
	_ = os.WriteFile(luaPath, []byte("wrk.method = \"POST\"\nwrk.body = '"+overheadBody+"'\nwrk.headers[\"Content-Type\"] = \"application/json\"\n"), 0o644)

	m := &overheadMeasure{wrk: wrk, wrkErr: wrkErr, lua: luaPath, addr: upAddrs[0], upPgids: upPgids, conc: res.Concurrency, dur: dur, vdur: vdur, logf: logf}
	rounds := max(o.Repeat, 1)
	res.Targets = measureRounds(ctx, len(targets), rounds, func(i, r int) OverheadTarget {
		t := targets[i]
		label := "overhead/" + t.name
		if rounds > 1 {
			label += fmt.Sprintf(" (round %d/%d)", r+1, rounds)
		}
		if o.Progress != nil {
			o.Progress.Begin(label, 0)
			defer o.Progress.End()
		}
		profDir := ""
		if r == 0 {
			profDir = o.ProfileDir
		}
		return m.target(ctx, t.name, t.start, profDir)
	})
	if rounds > 1 {
		res.Rounds = rounds
	}
	setRatios(res.Targets)

	// RSS of probegate (least_inflight) holding o.Streams idle streams.
	if bin != "" && ctx.Err() == nil {
		if o.Progress != nil {
			o.Progress.Begin("overhead/rss", o.Streams)
		}
		res.IdleStreams = o.Streams
		n := maxStreams(o.Streams)
		if n < o.Streams {
			res.RSSNote = fmt.Sprintf("the open-files hard limit allows %d streams (2 sockets each in the proxy), not %d; per-stream cost is (RSS - idle)/streams", n, o.Streams)
		}
		if err := measureRSS(ctx, bin, tmp, n, res, o.Progress, o.ProfileDir, nil); err != nil {
			res.RSSNote = strings.TrimPrefix(res.RSSNote+"; "+err.Error(), "; ")
		}
		logf("overhead: probegate RSS %.1f MiB idle, %.1f MiB with %d open streams", res.RSSIdleMiB, res.RSSStreamsMiB, res.StreamsOpened)
		if o.Progress != nil {
			o.Progress.End()
		}
	}
	return res, nil
}

// overheadMeasure holds what measuring one target of the overhead scenario
// needs: wrk (wrkErr: why it is missing), its Lua script, the address of
// direct (the first upstream), the upstream children's process groups
// (pinned runs), the connections and the durations.
type overheadMeasure struct {
	wrk       string
	wrkErr    error
	lua, addr string
	upPgids   []int
	conc      int
	dur, vdur time.Duration
	logf      func(string, ...any)
}

// target starts one target (start nil: direct, no proxy), measures it once
// with wrk, the Go generator and vegeta at each of VegetaRates, and stops
// it. With profDir set, probegate targets are profiled under wrk. A target
// that does not start is returned with only Error set.
func (m *overheadMeasure) target(ctx context.Context, name string, start func() (*child, error), profDir string) OverheadTarget {
	ot := OverheadTarget{Name: name}
	addr := m.addr
	var c *child
	if start != nil {
		var err error
		if c, err = start(); err != nil {
			ot.Error = err.Error()
			m.logf("overhead: %s: %v", name, err)
			return ot
		}
		addr = c.addr
	}
	defer c.Stop()
	url := "http://" + addr + "/v1/completions"
	if m.wrkErr == nil {
		wait := func() error { return nil }
		if profDir != "" && c != nil && c.admin != "" {
			wait = profileDuring(ctx, c.admin, profDir, name, m.dur-time.Second)
		}
		cpu0 := c.cpu()
		var err error
		ot.WrkRPS, ot.WrkLatency, err = runWrk(ctx, m.wrk, m.lua, url, m.conc, m.dur)
		if err != nil {
			ot.Error = "wrk: " + err.Error()
		}
		if cpu := c.cpu() - cpu0; cpu > 0 && ot.WrkRPS > 0 {
			ot.WrkCPUusPerReq = round3(float64(cpu.Microseconds()) / (ot.WrkRPS * m.dur.Seconds()))
		}
		if err := wait(); err != nil {
			m.logf("overhead: %v", err)
		}
	}
	ot.GoRPS, ot.GoLatency, ot.GoErrors = goFixedConcurrency(ctx, addr, m.conc, m.dur)
	if c != nil && c.admin != "" {
		if pc, err := readProbeCounts(ctx, c.admin); err == nil && pc.requests > 0 {
			ot.ProbesPerRequest = round3(pc.sent / pc.requests)
			ot.CoalescedPerRequest = round3(pc.coalesced / pc.requests)
		}
	}
	for _, rate := range VegetaRates {
		if ctx.Err() != nil {
			break
		}
		// The warm-up's requests count in none of the run's figures (CPU,
		// probes, share): the counters are read after it.
		g := NewLoopGen(url, false, 0)
		g.Warm(ctx, rate, WarmupFor(m.vdur))
		var before probeCounts
		var beforeErr error
		if c != nil && c.admin != "" {
			before, beforeErr = readProbeCounts(ctx, c.admin)
		}
		cpu0 := c.cpu()
		snap0 := takeCPUSnap(c.pgid(), m.upPgids)
		v := g.Run(ctx, rate, m.vdur, nil)
		snap1 := takeCPUSnap(c.pgid(), m.upPgids)
		g.Close()
		if cpu := c.cpu() - cpu0; cpu > 0 && v.Requests > 0 {
			v.CPUusPerReq = round3(float64(cpu.Microseconds()) / float64(v.Requests))
		}
		if sh := share(snap0, snap1, v.Requests, runtime.NumCPU()); sh.BusyCores > 0 {
			v.Share = &sh
		}
		if c != nil && c.admin != "" && beforeErr == nil {
			if after, err := readProbeCounts(ctx, c.admin); err == nil {
				v.noteProbes(after.minus(before))
			}
		}
		m.logf("overhead: %-26s vegeta %5d req/s offered: %8.0f sent, p50 %6.2f ms p99 %7.2f ms, %.1f%% ok, cpu %.1f us/req, probes/req %.3f timeouts/req %.3f coalesced/req %.3f%s", name, rate, v.AchievedRPS, v.Latency.P50, v.Latency.P99, 100*v.Success, v.CPUusPerReq, v.ProbesPerRequest, v.TimeoutsPerRequest, v.CoalescedPerRequest, v.Share.String())
		ot.Vegeta = append(ot.Vegeta, v)
	}
	m.logf("overhead: %-26s wrk %8.0f req/s p99 %6.2f ms cpu %5.1f us/req | go %8.0f req/s p99 %6.2f ms | probes/req %.3f coalesced/req %.3f", name, ot.WrkRPS, ot.WrkLatency.P99, ot.WrkCPUusPerReq, ot.GoRPS, ot.GoLatency.P99, ot.ProbesPerRequest, ot.CoalescedPerRequest)
	return ot
}

// raiseNoFile lifts the open-files limit (inherited by the children): 10,000
// streams hold 20,000 sockets in the proxy and as many here.
func raiseNoFile() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) != nil {
		return
	}
	want := uint64(200000)
	if l.Max < want {
		n := syscall.Rlimit{Cur: want, Max: want}
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &n) == nil {
			return
		}
	}
	l.Cur = l.Max
	_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
}

// buildProbegate builds the proxy binary (the module's main package) with
// the go tool, so it runs as its own process like nginx and HAProxy.
func buildProbegate(ctx context.Context, dir string) (string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("the overhead scenario builds probegate with the go tool: %w", err)
	}
	out := filepath.Join(dir, "probegate")
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", out, "github.com/probegate/probegate")
	// Build inside the module this file belongs to, wherever the bench
	// was started from.
	if _, file, _, ok := runtime.Caller(0); ok {
		if root := filepath.Dir(filepath.Dir(file)); fileExists(filepath.Join(root, "go.mod")) {
			cmd.Dir = root
		}
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v: %s", err, truncate(string(b), 300))
	}
	return out, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// startProbegate starts bin under policy in front of ups, with
// server.event_loop set to loop. The key is written only when loop is set,
// so a baseline binary older than the key (PROBEGATE_BENCH_BASELINE_BIN,
// which refuses unknown keys) still starts.
func startProbegate(ctx context.Context, bin, dir, policy string, ups []string, cpus []int, loop bool) (*child, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	admin, err := freeAddr()
	if err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf(`server:
  listen: "%s"
  admin_listen: "%s"%s
backends:
  static: [%s]
upstream:
  max_conns_per_backend: 20000
route:
  policy: %s
  d: 2
log:
  level: error
  access: false
`, addr, admin, eventLoopLine(loop), staticList(ups), policy)
	if loop {
		policy += "_loop" // the file names below
	}
	path := filepath.Join(dir, "probegate-"+policy+".yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	c, err := startChild(ctx, "probegate", addr, []string{bin, "-config", path}, filepath.Join(dir, "probegate-"+policy+".log"), cpus)
	if c != nil {
		c.admin = admin
	}
	return c, err
}

// eventLoopLine is the server.event_loop line of a config: empty when off
// (the default), so that binaries without the key accept the file.
func eventLoopLine(loop bool) string {
	if !loop {
		return ""
	}
	return "\n  event_loop: true"
}

func staticList(ups []string) string {
	q := make([]string, len(ups))
	for i, u := range ups {
		q[i] = `"http://` + u + `"`
	}
	return strings.Join(q, ", ")
}

func startNginx(ctx context.Context, bin, dir string, ups []string, cpus []int) (*child, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	nd := filepath.Join(dir, "nginx")
	_ = os.MkdirAll(filepath.Join(nd, "logs"), 0o755)
	conf := fmt.Sprintf(`worker_processes 2;
daemon off;
pid %[1]s/nginx.pid;
error_log %[1]s/logs/error.log error;
worker_rlimit_nofile 100000;
events { worker_connections 40000; multi_accept on; }
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  upstream fleet { least_conn; server %[2]s; server %[3]s; keepalive 256; }
  server {
    listen %[4]s backlog=4096;
    location / {
      proxy_pass http://fleet;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_read_timeout 3600s;
    }
  }
}
`, nd, ups[0], ups[1], addr)
	path := filepath.Join(nd, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	return startChild(ctx, "nginx", addr, []string{bin, "-p", nd, "-e", filepath.Join(nd, "logs", "error.log"), "-c", path}, filepath.Join(dir, "nginx.log"), cpus)
}

func startHAProxy(ctx context.Context, bin, dir string, ups []string, cpus []int) (*child, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	conf := fmt.Sprintf(`global
  maxconn 9000
  nbthread 2
defaults
  mode http
  timeout connect 2s
  timeout client 3600s
  timeout server 3600s
  option http-keep-alive
frontend fe
  bind %s
  default_backend be
backend be
  balance leastconn
  http-reuse always
  server s1 %s
  server s2 %s
`, addr, ups[0], ups[1])
	path := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	return startChild(ctx, "haproxy", addr, []string{bin, "-f", path, "-db"}, filepath.Join(dir, "haproxy.log"), cpus)
}

var (
	wrkRPS = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	wrkPct = regexp.MustCompile(`(?m)^\s+(50|75|90|99)%\s+([0-9.]+)(us|ms|s)\s*$`)
)

// runWrk runs wrk (2 threads, conc connections) and parses req/s and the
// latency distribution.
func runWrk(ctx context.Context, bin, lua, url string, conc int, dur time.Duration) (float64, Quantiles, error) {
	cmd := exec.CommandContext(ctx, bin, "-t2", "-c"+strconv.Itoa(conc), "-d"+strconv.Itoa(int(dur.Seconds()))+"s", "--latency", "-s", lua, url)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, Quantiles{}, fmt.Errorf("%v: %s", err, truncate(string(out), 200))
	}
	return parseWrk(string(out))
}

func parseWrk(out string) (float64, Quantiles, error) {
	m := wrkRPS.FindStringSubmatch(out)
	if m == nil {
		return 0, Quantiles{}, errors.New("no Requests/sec in wrk output")
	}
	rps, _ := strconv.ParseFloat(m[1], 64)
	var q Quantiles
	for _, p := range wrkPct.FindAllStringSubmatch(out, -1) {
		v, _ := strconv.ParseFloat(p[2], 64)
		switch p[3] {
		case "us":
			v /= 1000
		case "s":
			v *= 1000
		}
		switch p[1] {
		case "50":
			q.P50 = round3(v)
		case "90":
			q.P90 = round3(v)
		case "99":
			q.P99 = round3(v)
		}
	}
	return round3(rps), q, nil
}

// goFixedConcurrency runs conc closed-loop workers of small POSTs against
// addr for dur with one fasthttp HostClient, and returns req/s and latency.
func goFixedConcurrency(ctx context.Context, addr string, conc int, dur time.Duration) (float64, Quantiles, int64) {
	hc := &fasthttp.HostClient{Addr: addr, MaxConns: conc, MaxIdleConnDuration: 10 * time.Second}
	defer hc.CloseIdleConnections()
	var errs atomic.Int64
	lat := make([][]time.Duration, conc)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			for time.Since(start) < dur && ctx.Err() == nil {
				req.Reset()
				req.SetRequestURI("http://" + addr + "/v1/completions")
				req.Header.SetMethod("POST")
				req.Header.SetContentType("application/json")
				req.SetBodyString(overheadBody)
				t0 := time.Now()
				err := hc.DoTimeout(req, resp, 5*time.Second)
				if err != nil || resp.StatusCode() != 200 {
					errs.Add(1)
					continue
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	return round3(float64(len(all)) / el.Seconds()), quantilesMs(all, false), errs.Load()
}

// measureRSS starts probegate (least_inflight), reads its RSS idle, opens n
// streaming requests that the fast upstream holds open after one frame,
// and reads the RSS again. With profDir set, it also saves the proxy's heap
// profile with the streams open (profDir/idle_streams.heap.pprof). With
// then set, it calls then with the proxy's admin address while the streams
// are still open.
func measureRSS(ctx context.Context, bin, dir string, n int, res *OverheadResult, prog *Progress, profDir string, then func(admin string)) error {
	// The upstream holding the streams runs as a child process (this
	// executable re-run, see ServeUpstreamIfChild) so that this process
	// only holds the client ends of the streams.
	up, err := startUpstreamChild(ctx, dir, nil, false)
	if err != nil {
		return fmt.Errorf("stream upstream: %w", err)
	}
	defer up.Stop()
	uaddr := up.addr
	c, err := startProbegate(ctx, bin, dir, "least_inflight", []string{uaddr}, nil, false)
	if err != nil {
		return err
	}
	defer c.Stop()
	time.Sleep(300 * time.Millisecond)
	res.RSSIdleMiB = rssMiB(c.cmd.Process.Pid)
	body := `{"model":"m","prompt":"hello","max_tokens":1000000,"stream":true}`
	raw := []byte("POST /v1/completions HTTP/1.1\r\nHost: " + c.addr + "\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	conns := make([]net.Conn, n)
	defer func() {
		for _, cn := range conns {
			if cn != nil {
				_ = cn.Close()
			}
		}
	}()
	var opened atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	sem := make(chan struct{}, 256)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			cn, err := net.DialTimeout("tcp", c.addr, 5*time.Second)
			if err != nil {
				firstErr.CompareAndSwap(nil, err.Error())
				return
			}
			_ = cn.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := cn.Write(raw); err != nil {
				firstErr.CompareAndSwap(nil, err.Error())
				_ = cn.Close()
				return
			}
			buf := make([]byte, 4096)
			got := 0
			for !bytes.Contains(buf[:got], []byte("data:")) {
				k, err := cn.Read(buf[got:])
				got += k
				if err != nil || got == len(buf) {
					firstErr.CompareAndSwap(nil, fmt.Sprintf("stream %d: %v", i, err))
					_ = cn.Close()
					return
				}
			}
			_ = cn.SetDeadline(time.Time{})
			conns[i] = cn
			opened.Add(1)
			if prog != nil {
				prog.Tick()
			}
		}()
	}
	wg.Wait()
	res.StreamsOpened = int(opened.Load())
	time.Sleep(500 * time.Millisecond)
	res.RSSStreamsMiB = rssMiB(c.cmd.Process.Pid)
	if then != nil {
		then(c.admin)
	}
	if profDir != "" {
		if err := fetchProfile(ctx, "http://"+c.admin+"/debug/pprof/heap?gc=1", filepath.Join(profDir, "idle_streams.heap.pprof"), 10*time.Second); err != nil {
			return fmt.Errorf("heap profile: %w", err)
		}
	}
	if v := firstErr.Load(); v != nil {
		return fmt.Errorf("%d of %d streams opened; first error: %v", opened.Load(), n, v)
	}
	return nil
}

// startUpstreamChild runs the fast upstream in a child process (this
// executable re-run, see ServeUpstreamIfChild) restricted to cpus (nil:
// any), logging to a file in dir, and waits until it answers. raw picks the
// raw epoll loop (rawUpstream, Linux; it does not stream) over fasthttp.
func startUpstreamChild(ctx context.Context, dir string, cpus []int, raw bool) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	log := filepath.Join(dir, "upstream-"+strings.ReplaceAll(addr, ":", "-")+".log")
	env := upstreamEnv + "=" + addr
	if raw {
		env = rawUpstreamEnv + "=" + addr
	}
	return startChild(ctx, "upstream", addr, []string{self}, log, cpus, env)
}

// upstreamEnv, when set to an address, makes ServeUpstreamIfChild serve
// the fast upstream there; rawUpstreamEnv the raw epoll loop.
const (
	upstreamEnv    = "PROBEGATE_BENCH_UPSTREAM"
	rawUpstreamEnv = "PROBEGATE_BENCH_RAW_UPSTREAM"
)

// ServeUpstreamIfChild serves the overhead scenario's fast upstream and
// never returns when this process was started as that child (the
// environment names the address); otherwise it returns at once. Call it
// first in main.
func ServeUpstreamIfChild() {
	if addr := os.Getenv(rawUpstreamEnv); addr != "" {
		raiseNoFile()
		u, err := newRawUpstream(addr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "upstream:", err)
			os.Exit(1)
		}
		if err := u.Serve(); err != nil {
			fmt.Fprintln(os.Stderr, "upstream:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	addr := os.Getenv(upstreamEnv)
	if addr == "" {
		return
	}
	raiseNoFile()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "upstream:", err)
		os.Exit(1)
	}
	u := newFastUpstream(ln)
	_ = u.srv.Serve(ln)
	os.Exit(0)
}

// maxStreams is how many idle streams fit the open-files limit: the proxy
// holds two sockets per stream.
func maxStreams(want int) int {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) != nil {
		return want
	}
	limit := int(min(l.Max, 1<<30))
	return min(want, (limit-200)/2)
}

// rssMiB returns the resident set of pid, in MiB.
func rssMiB(pid int) float64 { return round3(float64(RSS(pid)) / (1 << 20)) }

// overheadReport renders the overhead section of report.md.
func overheadReport(o *OverheadResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## overhead\n\nA fast in-process fasthttp upstream (two listeners, small JSON answers), each proxy in its own process on loopback, %d connections, %.0f s per tool and target. Ratios are requests/s against nginx and against direct (no proxy); p99 ratios from the Go generator.\n\n", o.Concurrency, o.DurationS)
	if o.Pin != nil {
		fmt.Fprintf(&b, "Pinned (`-pin`): the load generators (wrk, vegeta, the Go generator) on CPU %v, each target and its two upstreams (child processes) on CPU %v.\n\n", o.Pin.GeneratorCPUs, o.Pin.TargetCPUs)
	} else if o.Upstream != "" {
		fmt.Fprintf(&b, "Not pinned: every process may run on every CPU; the upstreams are %s.\n\n", o.Upstream)
	} else {
		b.WriteString("Not pinned: every process may run on every CPU; the upstreams run in the bench's process.\n\n")
	}
	if o.Rounds > 1 {
		fmt.Fprintf(&b, "Medians of %d rounds: each round measured every target once, in turn (the order reversed every other round), so that the machine's drift reached all alike; the ranges are in the table after this one, each round's figures in results.json (`targets[].rounds`).\n\n", o.Rounds)
	}
	for _, s := range o.Skipped {
		fmt.Fprintf(&b, "> Skipped: %s\n\n", s)
	}
	for _, s := range o.Warnings {
		fmt.Fprintf(&b, "> Warning: %s\n\n", s)
	}
	b.WriteString("| target | wrk req/s | wrk p50 ms | wrk p99 ms | CPU µs/req (wrk) | probes / coalesced per req | Go req/s | Go p50 ms | Go p99 ms | req/s vs nginx (wrk / Go) | req/s vs direct (wrk / Go) | p99 vs nginx | p99 vs direct |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, t := range o.Targets {
		if t.Error != "" && t.GoRPS == 0 {
			fmt.Fprintf(&b, "| %s | error: %s |||||||||||\n", t.Name, truncate(t.Error, 80))
			continue
		}
		fmt.Fprintf(&b, "| %s | %.0f | %.2f | %.2f | %.1f | %.3f / %.3f | %.0f | %.2f | %.2f | %.2f / %.2f | %.2f / %.2f | %.2f | %.2f |\n",
			t.Name, t.WrkRPS, t.WrkLatency.P50, t.WrkLatency.P99, t.WrkCPUusPerReq, t.ProbesPerRequest, t.CoalescedPerRequest, t.GoRPS, t.GoLatency.P50, t.GoLatency.P99,
			t.VsNginxWrk, t.VsNginxGo, t.VsDirectWrk, t.VsDirectGo, t.P99VsNginx, t.P99VsDirect)
	}
	b.WriteString(roundsReport(o))
	b.WriteString(vegetaReport(o))
	if o.IdleStreams > 0 {
		per := 0.0
		if o.StreamsOpened > 0 {
			per = (o.RSSStreamsMiB - o.RSSIdleMiB) * 1024 / float64(o.StreamsOpened)
		}
		fmt.Fprintf(&b, "\nprobegate (least_inflight) RSS: %.1f MiB idle, **%.1f MiB with %d open idle streams** (%d requested; %.1f KiB per stream, so about %.0f MiB at 10,000).", o.RSSIdleMiB, o.RSSStreamsMiB, o.StreamsOpened, o.IdleStreams, per, o.RSSIdleMiB+per*10000/1024)
		if o.RSSNote != "" {
			fmt.Fprintf(&b, " Note: %s", o.RSSNote)
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	return b.String()
}
