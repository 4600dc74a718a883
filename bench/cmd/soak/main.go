// Command soak drives a steady request rate through a real probegate proxy
// to an in-process bench/vllmsim fleet for a fixed duration, while killing
// pods and restarting them at random, then checks that nothing leaked and
// that every error is explained by a fault.
//
//	go run ./bench/cmd/soak -duration 30m -rps 50
//
// Everything listens on 127.0.0.1 and stops by itself after -duration (plus
// at most -drain for the last requests and the leak checks).
//
// Error classes (by cause): "status_NNN" (the proxy answered NNN),
// "error_frame" (a 200 stream that carried an error frame), "truncated" (a
// 200 body that ended early), "transport" (the client connection failed),
// "timeout" (no complete answer within -req-timeout: a hang).
//
// Every error is also counted as "before first byte" (the client got no
// byte of an answer: an error status or a failed connection before the
// response headers) or "stream already under way" (a 200 whose body then
// failed). A failure before the first byte is one the proxy could have
// retried on another pod, so it is never explained, whatever the kills:
// the soak fails on any (except a 503 while more pods were down than
// upstream.retries can route around, which -max-down-pods 1 never
// causes). A failure of a stream already under way is explained when a pod
// was killed while the request was in flight (from its start to its end,
// plus -slack): only requests a dying pod had already started may fail.
// "timeout" is never explained. The report also gives the proxy's
// probegate_retries_total by reason.
//
// Kills (-kill) close the pod's connections with RST ("rst", as vllmsim's
// Close), with FIN ("fin", as the kernel closes a SIGKILLed process's idle
// sockets: vllmsim's Crash), or either at random ("mixed", the default).
//
// Leaks, checked after the load stops and the fleet is whole again: the
// proxy's per-backend in-flight counts must return to 0, the fleet's
// in-flight HTTP completion requests (vllmsim State.ServerLoad) must return
// to 0, goroutines must settle within -goroutine-slack of the count after
// warm-up, and the live heap after GC must stay below twice the warm-up
// heap plus 32 MiB. RSS is reported (it includes the fleet and the client,
// all in this process) but only the heap is judged, since RSS follows the
// GC's pacing and the OS.
//
// Exit status: 0 when clean, 1 on any unexplained error or leak, 2 on bad
// flags or setup failure.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/probegate/probegate/bench"
	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/internal/vllmsim"
	"github.com/probegate/probegate/route"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

type options struct {
	duration, killEvery, minDown, maxDown, reqTimeout, slack, drain time.Duration
	rps, streamShare, timeScale                                     float64
	pods, maxTokens, maxDownPods, goroutineSlack                    int
	seed                                                            uint64
	policy, kill                                                    string
	verbose                                                         bool
}

func run(args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&o.duration, "duration", 2*time.Minute, "how long to send load")
	fs.Float64Var(&o.rps, "rps", 40, "requests per second (open loop)")
	fs.IntVar(&o.pods, "pods", 4, "simulated vLLM pods")
	fs.DurationVar(&o.killEvery, "kill-every", 4*time.Second, "mean time between pod kills (exponential)")
	fs.DurationVar(&o.minDown, "min-down", 300*time.Millisecond, "shortest time a killed pod stays down")
	fs.DurationVar(&o.maxDown, "max-down", 3*time.Second, "longest time a killed pod stays down")
	fs.IntVar(&o.maxDownPods, "max-down-pods", 1, "pods down at once, at most")
	fs.Float64Var(&o.streamShare, "stream-share", 0.5, "share of streaming requests")
	fs.IntVar(&o.maxTokens, "max-tokens", 24, "max_tokens of each request (upper bound; drawn uniformly from 1)")
	fs.Float64Var(&o.timeScale, "time-scale", 0.5, "simulator time scale (1 = H100 speed)")
	fs.StringVar(&o.policy, "policy", "probe", "route.policy")
	fs.StringVar(&o.kill, "kill", "mixed", "how a killed pod's connections close: rst, fin or mixed")
	fs.DurationVar(&o.reqTimeout, "req-timeout", 30*time.Second, "a request without a complete answer by then is a hang")
	fs.DurationVar(&o.slack, "slack", 200*time.Millisecond, "time around a request within which a kill explains its failure")
	fs.DurationVar(&o.drain, "drain", 20*time.Second, "how long to wait for requests and goroutines to settle at the end")
	fs.IntVar(&o.goroutineSlack, "goroutine-slack", 25, "goroutines allowed above the warm-up count at the end")
	fs.Uint64Var(&o.seed, "seed", 1, "random seed")
	fs.BoolVar(&o.verbose, "v", false, "log the proxy's warnings to stderr")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.kill != "rst" && o.kill != "fin" && o.kill != "mixed" {
		fmt.Fprintln(stderr, "soak: -kill must be rst, fin or mixed")
		return 2
	}
	if o.rps <= 0 || o.pods < 2 || o.duration <= 0 || o.maxDownPods < 0 || o.maxDownPods >= o.pods || o.minDown > o.maxDown {
		fmt.Fprintln(stderr, "soak: need -rps > 0, -pods >= 2, -duration > 0, 0 <= -max-down-pods < -pods, -min-down <= -max-down")
		return 2
	}
	s, err := setup(o, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "soak: %v\n", err)
		return 2
	}
	defer s.close()
	return s.soak(stdout)
}

type soaker struct {
	o     options
	fleet *vllmsim.Fleet
	proxy *route.Proxy
	serve chan error
	url   string
	hc    *http.Client
	rng   *rand.Rand

	mu     sync.Mutex
	kills  []time.Time // kill instants (each kill's start and end)
	nkills int
	downs  []downSpan
	counts map[string]int
	bad    map[string]int // unexplained, by cause
	phase  map[string]int // errors by phase: before first byte, stream under way
	sample []string       // a few unexplained errors, for the report

	requests, ok, skipped atomic.Int64
}

type downSpan struct{ from, to time.Time } // [from, to): this many-pods-down span

func setup(o options, stderr io.Writer) (*soaker, error) {
	sim := vllmsim.DefaultConfig()
	sim.TimeScale = o.timeScale
	sim.Seed = int64(o.seed)
	fleet, err := vllmsim.StartFleet(o.pods, "127.0.0.1", 0, sim)
	if err != nil {
		return nil, err
	}
	cfg := config.Default()
	cfg.Backends.Static = fleet.URLs()
	cfg.Route.Policy = o.policy
	cfg.Server.Listen = "127.0.0.1:0"
	cfg.Server.ReadTimeout = config.Duration(10 * time.Second)
	cfg.Upstream.FirstByteTimeout = config.Duration(10 * time.Second)
	cfg.Upstream.IdleTimeout = config.Duration(5 * time.Second)
	cfg.Breaker.OpenFor = config.Duration(time.Second)
	cfg.Breaker.ConsecutiveFailures = 3
	cfg.Log.Access = false
	log := zerolog.Nop()
	if o.verbose {
		log = zerolog.New(stderr).Level(zerolog.WarnLevel).With().Timestamp().Logger()
	}
	p, err := route.New(route.Options{Config: cfg, Logger: log})
	if err != nil {
		fleet.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		p.Close()
		fleet.Close()
		return nil, err
	}
	s := &soaker{
		o: o, fleet: fleet, proxy: p, serve: make(chan error, 1),
		url:    "http://" + ln.Addr().String(),
		rng:    rand.New(rand.NewPCG(o.seed, 0x50a4)),
		counts: map[string]int{}, bad: map[string]int{}, phase: map[string]int{},
		hc: &http.Client{Timeout: o.reqTimeout, Transport: &http.Transport{
			MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second,
		}},
	}
	go func() { s.serve <- p.Serve(ln) }()
	return s, nil
}

func (s *soaker) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.proxy.Shutdown(ctx)
	<-s.serve
	s.fleet.Close()
}

// snapshot is the process's resource use at a point.
type snapshot struct {
	goroutines int
	heap       uint64 // live heap after GC
	rss        uint64
}

func (s *soaker) settle(floor int) snapshot {
	s.hc.CloseIdleConnections()
	deadline := time.Now().Add(s.o.drain)
	var n int
	for {
		runtime.GC()
		n = runtime.NumGoroutine()
		if n <= floor || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
		s.hc.CloseIdleConnections()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return snapshot{goroutines: n, heap: ms.HeapAlloc, rss: rss()}
}

// rss returns this process's resident set size (0 where unavailable).
func rss() uint64 { return bench.RSS(0) }

func (s *soaker) soak(stdout io.Writer) int {
	// Warm up: one request per pod's worth, then measure the baseline.
	for range 2 * s.o.pods {
		s.one(context.Background(), false)
	}
	s.mu.Lock()
	s.counts, s.bad, s.phase, s.sample = map[string]int{}, map[string]int{}, map[string]int{}, nil
	s.mu.Unlock()
	s.requests.Store(0)
	s.ok.Store(0)
	start := s.settle(0)
	fmt.Fprintf(stdout, "soak: %d pods, %.0f rps, %v, policy %s, kill (%s) every ~%v (down %v..%v, at most %d at once)\n",
		s.o.pods, s.o.rps, s.o.duration, s.o.policy, s.o.kill, s.o.killEvery, s.o.minDown, s.o.maxDown, s.o.maxDownPods)
	retriesStart := s.retries()

	ctx, cancel := context.WithTimeout(context.Background(), s.o.duration)
	defer cancel()
	var chaos sync.WaitGroup
	chaos.Add(1)
	go func() { defer chaos.Done(); s.chaos(ctx) }()

	var reqs sync.WaitGroup
	sem := make(chan struct{}, 2000)
	interval := time.Duration(float64(time.Second) / s.o.rps)
	t := time.NewTicker(interval)
	began := time.Now()
	lastReport := began
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-t.C:
		}
		select {
		case sem <- struct{}{}:
		default:
			s.skipped.Add(1) // the client itself is saturated: not the proxy's error
			continue
		}
		reqs.Add(1)
		stream := s.rng.Float64() < s.o.streamShare
		go func() {
			defer reqs.Done()
			defer func() { <-sem }()
			s.one(context.Background(), stream)
		}()
		if time.Since(lastReport) >= time.Minute {
			lastReport = time.Now()
			fmt.Fprintf(stdout, "  %v: %d requests, %d ok, %d goroutines\n", time.Since(began).Round(time.Second), s.requests.Load(), s.ok.Load(), runtime.NumGoroutine())
		}
	}
	t.Stop()
	chaos.Wait()
	reqs.Wait()
	elapsed := time.Since(began)

	// The fleet is whole again (chaos restarted every pod); wait for the
	// books to balance.
	leaks := s.checkBooks()
	end := s.settle(start.goroutines + 5)

	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(stdout, "requests: %d in %v (%.1f/s), ok %d, client-side skips %d, pod kills %d\n",
		s.requests.Load(), elapsed.Round(time.Millisecond), float64(s.requests.Load())/elapsed.Seconds(), s.ok.Load(), s.skipped.Load(), s.nkills)
	fmt.Fprintf(stdout, "errors by cause: %s\n", fmtCounts(s.counts))
	fmt.Fprintf(stdout, "client-visible errors: before first byte %d, stream already under way %d\n", s.phase[phaseBefore], s.phase[phaseUnderWay])
	retriesEnd := s.retries()
	for k, v := range retriesStart {
		retriesEnd[k] -= v
	}
	fmt.Fprintf(stdout, "proxy retries by reason: %s\n", fmtCounts(retriesEnd))
	fmt.Fprintf(stdout, "unexplained:     %s\n", fmtCounts(s.bad))
	for _, e := range s.sample {
		fmt.Fprintf(stdout, "  e.g. %s\n", e)
	}
	fmt.Fprintf(stdout, "goroutines: start %d, end %d\n", start.goroutines, end.goroutines)
	fmt.Fprintf(stdout, "heap after GC: start %.1f MiB, end %.1f MiB\n", mib(start.heap), mib(end.heap))
	fmt.Fprintf(stdout, "RSS: start %.1f MiB, end %.1f MiB\n", mib(start.rss), mib(end.rss))
	if end.goroutines > start.goroutines+s.o.goroutineSlack {
		leaks = append(leaks, fmt.Sprintf("goroutines grew from %d to %d (slack %d)", start.goroutines, end.goroutines, s.o.goroutineSlack))
	}
	if end.heap > 2*start.heap+32<<20 {
		leaks = append(leaks, fmt.Sprintf("live heap grew from %.1f to %.1f MiB", mib(start.heap), mib(end.heap)))
	}
	unexplained := 0
	for _, n := range s.bad {
		unexplained += n
	}
	if s.requests.Load() == 0 {
		leaks = append(leaks, "no request was sent")
	}
	for _, l := range leaks {
		fmt.Fprintf(stdout, "LEAK: %s\n", l)
	}
	if unexplained > 0 || len(leaks) > 0 {
		fmt.Fprintf(stdout, "FAIL: %d unexplained errors, %d leaks\n", unexplained, len(leaks))
		if len(leaks) > 0 {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			fmt.Fprintf(os.Stderr, "goroutines at the end:\n%s\n", buf[:n])
		}
		return 1
	}
	fmt.Fprintln(stdout, "PASS")
	return 0
}

// checkBooks waits until the proxy and the fleet have nothing in flight.
func (s *soaker) checkBooks() []string {
	deadline := time.Now().Add(s.o.drain)
	for {
		proxyInflight, podLoad := 0, 0
		for _, b := range s.proxy.DebugBackends() {
			proxyInflight += b.Inflight
		}
		for _, sv := range s.fleet.Servers() {
			podLoad += sv.State().ServerLoad
		}
		if proxyInflight == 0 && podLoad == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return []string{fmt.Sprintf("after the load stopped: proxy in-flight %d, pods' in-flight HTTP requests %d (want 0, 0)", proxyInflight, podLoad)}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// chaos kills a random running pod every ~killEvery and restarts it after a
// random down time, never more than maxDownPods at once. When ctx ends it
// restarts every pod still down and returns.
func (s *soaker) chaos(ctx context.Context) {
	servers := s.fleet.Servers()
	down := make([]bool, len(servers))
	var wg sync.WaitGroup
	var mu sync.Mutex // guards down, ndown
	ndown := 0
	var spanFrom time.Time
	rng := rand.New(rand.NewPCG(s.o.seed, 0xc4a05))
	for {
		wait := time.Duration(rng.ExpFloat64() * float64(s.o.killEvery))
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-time.After(wait):
		}
		mu.Lock()
		if ndown >= s.o.maxDownPods {
			mu.Unlock()
			continue
		}
		i := rng.IntN(len(servers))
		for down[i] {
			i = (i + 1) % len(servers)
		}
		down[i] = true
		ndown++
		if ndown > s.o.proxyRetries() && spanFrom.IsZero() {
			spanFrom = time.Now()
		}
		mu.Unlock()
		s.mu.Lock()
		s.kills = append(s.kills, time.Now())
		s.nkills++
		s.mu.Unlock()
		kill := servers[i].Close // RST
		if s.o.kill == "fin" || s.o.kill == "mixed" && rng.IntN(2) == 0 {
			kill = servers[i].Crash // FIN
		}
		_ = kill()
		s.mu.Lock()
		s.kills = append(s.kills, time.Now()) // the kill spans Close's duration
		s.mu.Unlock()
		downFor := s.o.minDown + time.Duration(rng.Int64N(int64(s.o.maxDown-s.o.minDown)+1))
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			time.Sleep(downFor) // pods come back even after ctx ends
			if err := servers[i].Restart(); err != nil {
				fmt.Fprintf(os.Stderr, "soak: restarting pod %d: %v\n", i, err)
			}
			mu.Lock()
			down[i] = false
			ndown--
			if ndown <= s.o.proxyRetries() && !spanFrom.IsZero() {
				s.mu.Lock()
				s.downs = append(s.downs, downSpan{spanFrom, time.Now()})
				s.mu.Unlock()
				spanFrom = time.Time{}
			}
			mu.Unlock()
		}(i)
	}
}

// proxyRetries is upstream.retries as the soak configures it (the default).
func (o options) proxyRetries() int { return config.Default().Upstream.Retries }

// one sends one request and classifies its outcome.
func (s *soaker) one(ctx context.Context, stream bool) {
	s.requests.Add(1)
	mt := 1 + rand.IntN(s.o.maxTokens)
	body := fmt.Sprintf(`{"model":%q,"prompt":"soak request %d: tell me about reliability","max_tokens":%d,"stream":%t}`,
		vllmsim.DefaultConfig().Model, rand.IntN(1000), mt, stream)
	start := time.Now()
	cause, detail := s.do(ctx, body, stream)
	end := time.Now()
	if cause == "" {
		s.ok.Add(1)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts[cause]++
	ph := phaseOf(cause)
	s.phase[ph]++
	if !s.explained(cause, ph, start, end) {
		s.bad[cause]++
		if len(s.sample) < 10 {
			s.sample = append(s.sample, fmt.Sprintf("%s at %s after %v: %s", cause, start.Format("15:04:05.000"), end.Sub(start).Round(time.Millisecond), detail))
		}
	}
}

// Phases of a client-visible error.
const (
	phaseBefore   = "before_first_byte"
	phaseUnderWay = "stream_under_way"
)

// phaseOf tells whether a failure of cause reached the client before any
// byte of an answer (an error status, or the connection failed before the
// response headers) or after a 200 had started.
func phaseOf(cause string) string {
	switch {
	case strings.HasPrefix(cause, "status_"), cause == "transport_before", cause == "timeout_before":
		return phaseBefore
	}
	return phaseUnderWay
}

// explained reports whether a failure of cause in phase ph over [start,
// end] is explained by a fault. Call with s.mu held.
func (s *soaker) explained(cause, ph string, start, end time.Time) bool {
	if strings.HasPrefix(cause, "timeout") {
		return false // a hang is never acceptable: every fault has a timeout
	}
	from, to := start.Add(-s.o.slack), end.Add(s.o.slack)
	if ph == phaseBefore {
		// Another pod could have answered: only a 503 while more pods
		// were down than retries can route around is explained.
		if cause != "status_503" {
			return false
		}
		for _, d := range s.downs {
			if d.from.Before(to) && d.to.After(from) {
				return true
			}
		}
		return false
	}
	i := sort.Search(len(s.kills), func(i int) bool { return !s.kills[i].Before(from) })
	return i < len(s.kills) && !s.kills[i].After(to)
}

// do sends body with the bench's client (bench.Post) and returns "" on
// success or the failure's cause and detail.
func (s *soaker) do(ctx context.Context, body string, stream bool) (cause, detail string) {
	var x bench.Exchange
	bench.Post(ctx, s.hc, s.url+"/v1/completions", []byte(body), stream, &x)
	return classify(&x, stream)
}

// classify names why an exchange failed ("" if it did not), in the order
// the failure reached the client: no response ("transport_before",
// "timeout_before"), an error status ("status_NNN"), an error frame in a
// 200 stream ("error_frame"), a 200 body that broke ("transport",
// "timeout") or ended early ("truncated": a stream without [DONE], or a
// non-streamed answer without choices).
func classify(x *bench.Exchange, stream bool) (cause, detail string) {
	switch {
	case x.Status == 0:
		return transportCause(x.Err) + "_before", x.Err.Error()
	case x.Status != http.StatusOK:
		return "status_" + strconv.Itoa(x.Status), string(x.Body)
	case x.ErrorFrame != nil:
		return "error_frame", "data: " + string(x.ErrorFrame)
	case x.Err != nil && x.Err != io.EOF:
		return transportCause(x.Err), x.Err.Error()
	case !stream && !bytes.Contains(x.Body, []byte(`"choices"`)):
		return "truncated", string(x.Body)
	case stream && !x.Done:
		return "truncated", "stream ended without [DONE]"
	}
	return "", ""
}

func transportCause(err error) string {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	return "transport"
}

// retries returns the proxy's probegate_retries_total by reason.
func (s *soaker) retries() map[string]int {
	out := map[string]int{}
	mfs, err := s.proxy.Gatherer().Gather()
	if err != nil {
		return out
	}
	for _, mf := range mfs {
		if mf.GetName() != "probegate_retries_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" {
					out[l.GetValue()] = int(m.GetCounter().GetValue())
				}
			}
		}
	}
	return out
}

func fmtCounts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", k, m[k])
	}
	return b.String()
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }
