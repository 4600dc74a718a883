package bench

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// VegetaRates are the open-loop rates (requests/s) the overhead scenario
// offers every target with vegeta, next to wrk's closed loop: closed-loop
// throughput hides the latency a user sees at a given rate.
// 10k is the rate of the latency goal; the generator itself (Go's
// net/http client) may not reach the highest rates on a small or shared
// machine, so each run reports the rate it achieved.
var VegetaRates = []int{2000, 5000, 10000, 20000}

// VegetaRun is one open-loop constant-rate run of vegeta's library against
// one target.
type VegetaRun struct {
	Rate        int       `json:"rate"`         // offered requests/s
	AchievedRPS float64   `json:"achieved_rps"` // requests/s actually sent
	Throughput  float64   `json:"throughput"`   // successful answers/s
	Success     float64   `json:"success"`      // fraction of 200 answers
	Requests    uint64    `json:"requests"`
	Latency     Quantiles `json:"latency_ms"`
	Errors      []string  `json:"errors,omitempty"` // up to 3 distinct
	// For probegate targets, read from its counters around the run:
	// probes sent, probes that timed out and joins of a probe in flight,
	// per request answered, and the proxy's CPU time per request sent
	// (user + system, µs).
	ProbesPerRequest    float64 `json:"probes_per_request,omitempty"`
	TimeoutsPerRequest  float64 `json:"probe_timeouts_per_request,omitempty"`
	CoalescedPerRequest float64 `json:"coalesced_per_request,omitempty"`
	CPUusPerReq         float64 `json:"cpu_us_per_req,omitempty"`
	// GCPer1kReq is the target's garbage collections per 1,000 requests
	// answered during the run (probegate targets, from its go_gc counter).
	GCPer1kReq float64 `json:"gc_per_1k_req,omitempty"`
	// Share says where the machine's CPU went during the run (Linux).
	Share *CPUShare `json:"cpu_share,omitempty"`
}

// noteProbes sets the per-request probe figures of v from the counters
// accrued during it.
func (v *VegetaRun) noteProbes(d probeCounts) {
	if d.requests <= 0 {
		return
	}
	v.ProbesPerRequest = round3(d.sent / d.requests)
	v.TimeoutsPerRequest = round3(d.timeouts / d.requests)
	v.CoalescedPerRequest = round3(d.coalesced / d.requests)
	v.GCPer1kReq = round3(1000 * d.gcCycles / d.requests)
}

// vegetaCLI is the vegeta command line that reproduces one run by hand
// (README, report.md).
const vegetaCLI = `printf 'POST http://127.0.0.1:PORT/v1/completions\nContent-Type: application/json\n@body.json\n' | go run github.com/tsenart/vegeta/v12@v12.13.0 attack -rate 10000/s -duration 3s -keepalive -http2=false -max-workers 512 | go run github.com/tsenart/vegeta/v12@v12.13.0 report`

// vegetaMaxWorkers bounds the requests in flight of one open-loop run.
const vegetaMaxWorkers = 512

// wrkCLI is the wrk command line of the closed-loop runs.
const wrkCLI = `wrk -t2 -c64 -d8s --latency -s post.lua http://127.0.0.1:PORT/v1/completions`

// OpenLoop is the overhead scenario's open-loop run, also for use by hand
// (bench/cmd/openloop): rate requests/s of the overhead POST to url for
// dur, open loop (a request leaves at its time whatever happened to
// earlier ones; vegeta adds workers up to 512 in flight, then falls
// behind, which the achieved rate shows), summarised. Latencies are
// vegeta's: from the request's send to the end of its response body.
// Before the run, the same generator offers the same rate for
// WarmupFor(dur), not measured (see LoopGen.Warm); the run's connections
// are closed when it ends, so that runs do not pile up idle connections on
// the targets. The exchanges go through leanTransport (see there why not
// net/http's); with netHTTP through net/http's Transport, as the vegeta
// command line does: the same load at about twice the generator's CPU per
// request.
func OpenLoop(ctx context.Context, url string, rate int, dur time.Duration, netHTTP bool) VegetaRun {
	g := NewLoopGen(url, netHTTP, 0)
	defer g.Close()
	g.Warm(ctx, rate, WarmupFor(dur))
	return g.Run(ctx, rate, dur, nil)
}

// WarmupFor is the warm-up before an open-loop run of length dur: a third
// of it, at most 1 s (1 s before the overhead scenario's 3 s runs).
func WarmupFor(dur time.Duration) time.Duration { return min(dur/3, time.Second) }

// LoopGen is one open-loop generator: vegeta's attacker over one HTTP
// client, whose connections live from NewLoopGen to Close, across Warm and
// Run.
type LoopGen struct {
	tr         vegeta.Targeter
	client     *http.Client
	maxWorkers int
	close      func()
}

// NewLoopGen returns a generator of the overhead POST to url. maxWorkers
// > 0 replaces vegetaMaxWorkers as the bound on requests in flight (and
// so on the generator's connections); at or below vegeta's initial 64
// workers the generator holds a fixed connection count and, once they are
// all busy, sends late instead of opening more. With netHTTP the
// exchanges go through net/http's Transport instead of leanTransport.
func NewLoopGen(url string, netHTTP bool, maxWorkers int) *LoopGen {
	if maxWorkers <= 0 {
		maxWorkers = vegetaMaxWorkers
	}
	g := &LoopGen{
		tr: vegeta.NewStaticTargeter(vegeta.Target{
			Method: http.MethodPost,
			URL:    url,
			Body:   []byte(overheadBody),
			Header: http.Header{"Content-Type": []string{"application/json"}},
		}),
		client:     &http.Client{},
		maxWorkers: maxWorkers,
	}
	if netHTTP {
		tp := &http.Transport{
			MaxIdleConnsPerHost: maxWorkers,
			DisableCompression:  true,
			IdleConnTimeout:     time.Minute,
		}
		g.client.Transport, g.client.Timeout, g.close = tp, leanTimeout, tp.CloseIdleConnections
	} else {
		host := strings.TrimPrefix(url, "http://")
		if i := strings.IndexByte(host, '/'); i >= 0 {
			host = host[:i]
		}
		tp := newLeanTransport(host, maxWorkers)
		g.client.Transport, g.close = tp, tp.CloseIdleConnections
	}
	return g
}

// Close closes the generator's idle connections.
func (g *LoopGen) Close() { g.close() }

// attacker returns a fresh vegeta attacker on g's client (an attacker
// stops for good after one attack).
func (g *LoopGen) attacker() *vegeta.Attacker {
	return vegeta.NewAttacker(
		vegeta.Workers(uint64(min(64, g.maxWorkers))),
		vegeta.MaxWorkers(uint64(g.maxWorkers)),
		vegeta.Client(g.client),
	)
}

// Warm offers rate requests/s for d and discards the answers; it returns
// once every request has been answered. A fresh generator opens its
// connections in the run's first few hundred milliseconds: at 10k req/s it
// had 241-512 of them open 0.5 s in against every target, the raw upstream
// alone included, and that storm set every target's p99 in a 4 s run
// (session 11, results/2026-12-02-s11/gen).
// After Warm, Run starts on connections already open, so that its figures
// are the rate's, not the connection storm's.
func (g *LoopGen) Warm(ctx context.Context, rate int, d time.Duration) {
	if d <= 0 {
		return
	}
	atk := g.attacker()
	for range atk.Attack(g.tr, vegeta.Rate{Freq: rate, Per: time.Second}, d, "warm-up") {
		if ctx.Err() != nil {
			atk.Stop()
		}
	}
}

// Run offers rate requests/s for dur and summarises the answers; each,
// when not nil, sees every result as it arrives.
func (g *LoopGen) Run(ctx context.Context, rate int, dur time.Duration, each func(*vegeta.Result)) VegetaRun {
	atk := g.attacker()
	var m vegeta.Metrics
	for r := range atk.Attack(g.tr, vegeta.Rate{Freq: rate, Per: time.Second}, dur, "overhead") {
		m.Add(r)
		if each != nil {
			each(r)
		}
		if ctx.Err() != nil {
			atk.Stop()
		}
	}
	m.Close()
	run := VegetaRun{
		Rate:        rate,
		AchievedRPS: round3(m.Rate),
		Throughput:  round3(m.Throughput),
		Success:     round3(m.Success),
		Requests:    m.Requests,
		Latency: Quantiles{
			P50: msOf(m.Latencies.P50),
			P90: msOf(m.Latencies.P90),
			P99: msOf(m.Latencies.P99),
		},
	}
	if len(m.Errors) > 3 {
		m.Errors = m.Errors[:3]
	}
	run.Errors = m.Errors
	return run
}

func msOf(d time.Duration) float64 { return round3(float64(d) / float64(time.Millisecond)) }

// vegetaAt returns t's run at rate, if any.
func (t *OverheadTarget) vegetaAt(rate int) *VegetaRun {
	if t == nil {
		return nil
	}
	for i := range t.Vegeta {
		if t.Vegeta[i].Rate == rate {
			return &t.Vegeta[i]
		}
	}
	return nil
}

// vegetaTable appends a table with one row per target that has vegeta runs
// (skipped: those skip names) and one column per offered rate; cell writes
// a run's cell, "-" standing for a rate not run.
func vegetaTable(b *strings.Builder, o *OverheadResult, skip func(*OverheadTarget) bool, cell func(*strings.Builder, *VegetaRun)) {
	b.WriteString("| target |")
	for _, r := range VegetaRates {
		fmt.Fprintf(b, " %dk req/s |", r/1000)
	}
	b.WriteString("\n|---|")
	for range VegetaRates {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for i := range o.Targets {
		t := &o.Targets[i]
		if len(t.Vegeta) == 0 || skip(t) {
			continue
		}
		fmt.Fprintf(b, "| %s |", t.Name)
		for _, rate := range VegetaRates {
			if v := t.vegetaAt(rate); v == nil {
				b.WriteString(" -")
			} else {
				cell(b, v)
			}
			b.WriteString(" |")
		}
		b.WriteString("\n")
	}
}

// vegetaReport renders the open-loop tables of report.md.
func vegetaReport(o *OverheadResult) string {
	var b strings.Builder
	b.WriteString("\nOpen loop with vegeta's library (`" + vegetaCLI + "`; by hand, with `body.json` holding `" + overheadBody + "`), next to wrk's closed loop (`" + wrkCLI + "`). Each run follows an unmeasured warm-up at its rate on the same connections (a third of the run, at most 1 s). Per offered rate: achieved req/s, then p50 / p99 latency in ms; success below 100% is shown.\n\n")
	vegetaTable(&b, o, func(*OverheadTarget) bool { return false }, func(b *strings.Builder, v *VegetaRun) {
		fmt.Fprintf(b, " %.0f: %.2f / %.2f", v.AchievedRPS, v.Latency.P50, v.Latency.P99)
		if v.Success < 1 {
			fmt.Fprintf(b, " (%.1f%% ok)", 100*v.Success)
		}
	})
	b.WriteString("\nThe proxies' CPU time per request sent (µs, user + system) at each rate; for probegate also probes sent, probes timed out and joins of a probe in flight, per request, and its garbage collections per 1,000 requests (from its counters around the run).\n\n")
	vegetaTable(&b, o, func(t *OverheadTarget) bool { return t.Name == "direct" }, func(b *strings.Builder, v *VegetaRun) {
		fmt.Fprintf(b, " %.1f", v.CPUusPerReq)
		if v.ProbesPerRequest > 0 || v.CoalescedPerRequest > 0 {
			fmt.Fprintf(b, "; %.3f / %.3f / %.3f", v.ProbesPerRequest, v.TimeoutsPerRequest, v.CoalescedPerRequest)
		}
		if v.GCPer1kReq > 0 {
			fmt.Fprintf(b, "; GC %.2f per 1k req", v.GCPer1kReq)
		}
	})
	b.WriteString(saturationReport(o))
	if hasShare(o) {
		b.WriteString("\nWhere the machine's CPU went during each run (Linux: /proc/stat, /proc/PID/task/*/schedstat): CPUs used on average by the target / the bench's process (vegeta, and the upstreams when they run in it) / the upstream child processes / everything else, then the machine's busy CPUs of all; and the time the target's threads stood runnable without a CPU (run-queue wait), µs per request. A target that waits for a CPU queues whatever its code does.\n\n")
		vegetaTable(&b, o, func(*OverheadTarget) bool { return false }, func(b *strings.Builder, v *VegetaRun) {
			s := v.Share
			if s == nil {
				b.WriteString(" -")
				return
			}
			fmt.Fprintf(b, " %.2f / %.2f / %.2f / %.2f = %.2f of %d; wait %.1f", s.TargetCores, s.GeneratorCores, s.UpstreamCores, s.OtherCores, s.BusyCores, s.CPUs, s.TargetWaitUsPerReq)
		})
	}
	b.WriteString("\n")
	return b.String()
}

// hasShare reports whether any run of o has a CPU share.
func hasShare(o *OverheadResult) bool {
	for i := range o.Targets {
		for j := range o.Targets[i].Vegeta {
			if o.Targets[i].Vegeta[j].Share != nil {
				return true
			}
		}
	}
	return false
}
