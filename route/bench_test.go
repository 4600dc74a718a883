package route

import (
	"context"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/probe"
)

// instantFetcher answers every probe and scrape at once with a fixed load,
// so pick benchmarks measure routing, not the network.
type instantFetcher struct{ now func() time.Time }

func (f instantFetcher) Fetch(_ context.Context, s *probe.State, _ probe.Endpoint) (probe.Load, error) {
	return probe.Load{Running: 3, Waiting: 1, KVUse: 0.4, ServerLoad: -1, At: f.now(), Source: probe.SourceProbe}, nil
}

// benchProxy builds a Proxy over n unreachable backends with policy pol,
// route.d 2 (the figures these benchmarks name; route.d auto samples 4 from
// config.LargePool backends: benchProxyD) and a frozen clock, without
// listening.
func benchProxy(b testing.TB, n int, pol string) *Proxy {
	b.Helper()
	return benchProxyD(b, n, pol, 2)
}

// benchProxyD is benchProxy with route.d d (config.DAuto: the size rule).
func benchProxyD(b testing.TB, n int, pol string, d int) *Proxy {
	b.Helper()
	cfg := config.Default()
	cfg.Route.Policy = pol
	cfg.Route.D = d
	cfg.Log.Access = false
	cfg.Scrape.Interval = config.Duration(time.Hour)
	cfg.Scrape.MaxInterval = config.Duration(time.Hour)
	cfg.Scrape.Adaptive = false
	cfg.Backends.Static = nil
	for i := 0; i < n; i++ {
		cfg.Backends.Static = append(cfg.Backends.Static, fmt.Sprintf("http://127.0.0.2:%d", 10000+i))
	}
	t0 := time.Unix(1_800_000_000, 0)
	now := func() time.Time { return t0 }
	p, err := New(Options{Config: cfg, Now: now, Fetcher: instantFetcher{now: now}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.Close)
	// Every backend has a fresh report, so the probe policy skips probing
	// (skipped_fresh) and the benchmark isolates sampling and scoring.
	for i, be := range p.Pool().Backends() {
		l := probe.Load{Running: i % 7, Waiting: i % 3, KVUse: float64(i%10) / 10, ServerLoad: -1, At: t0, Source: probe.SourceScrape}
		be.state.Report(&l)
	}
	return p
}

// BenchmarkPick measures one routing decision: sampling d=2 eligible
// backends, building their views, scoring and picking; for the probe
// policy also d=4, what route.d auto samples from config.LargePool
// backends. It must not allocate. backends=2 is the bench's overhead
// scenario.
func BenchmarkPick(b *testing.B) {
	for _, name := range []string{"least_inflight", "probe", "probe_d4", "round_robin", "cached"} {
		pol, d := name, 2
		if name == "probe_d4" {
			pol, d = "probe", 4
		}
		for _, n := range []int{2, 8, 64, 512} {
			b.Run(fmt.Sprintf("policy=%s/d=%d/backends=%d", pol, d, n), func(b *testing.B) {
				p := benchProxyD(b, n, pol, d)
				pk := p.snap.Load().picker
				rc := newReqCtx()
				ctx := context.Background()
				b.ReportAllocs()
				for b.Loop() {
					if _, _, err := pk.Pick(ctx, &rc.info, nil, &rc.pick); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// fastUpstream serves a small JSON answer at once, like a cached endpoint.
func fastUpstream(b testing.TB) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":"ok","finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
	metrics := []byte("vllm:num_requests_running{model_name=\"m\"} 0.0\nvllm:num_requests_waiting{model_name=\"m\"} 0.0\nvllm:kv_cache_usage_perc{model_name=\"m\"} 0.0\n")
	s := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == "/metrics" { // the probes' endpoint
			ctx.SetContentType("text/plain; version=0.0.4")
			ctx.SetBody(metrics)
			return
		}
		ctx.SetContentType("application/json")
		ctx.SetBody(body)
	}}
	go func() { _ = s.Serve(ln) }()
	b.Cleanup(func() { _ = s.Shutdown() })
	return ln.Addr().String()
}

// BenchmarkForward compares a small non-streaming request sent directly to
// a fast local upstream with the same request through the proxy (d=2 over
// two such upstreams, which also serve a small vLLM /metrics for the
// probes, as in the bench's overhead scenario). ns/op is the sequential
// round trip; the difference is the proxy's added latency. p50-us and
// p99-us report the per-request latency distribution. The parallel
// variants send from 32 goroutines at once (16 x GOMAXPROCS on 2 cores),
// so that probe mode's requests find fresh state or join a probe in
// flight, as under load; ns/op is then the inverse of throughput.
// cpu-us/op and usr-us/op are the process's CPU time per request (all of
// it, and user mode alone), client and upstreams included: less moved by
// other processes' load than ns/op, and what a change of the proxy's own
// work shows in.
func BenchmarkForward(b *testing.B) {
	up, up2 := fastUpstream(b), fastUpstream(b)
	body := []byte(`{"model":"m","prompt":"Say hi","max_tokens":1}`)
	request := func(addr string) *fasthttp.Request {
		req := fasthttp.AcquireRequest()
		req.SetRequestURI("http://" + addr + "/v1/completions")
		req.Header.SetMethod("POST")
		req.Header.SetContentType("application/json")
		req.SetBody(body)
		return req
	}
	run := func(b *testing.B, addr string) {
		c := &fasthttp.HostClient{Addr: addr, MaxConns: 4}
		req, resp := request(addr), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		lat := make([]time.Duration, 0, 1<<16)
		b.ReportAllocs()
		cpuDone := reportCPU(b)
		for b.Loop() {
			t0 := time.Now()
			if err := c.Do(req, resp); err != nil || resp.StatusCode() != 200 {
				b.Fatalf("status %d, err %v", resp.StatusCode(), err)
			}
			if len(lat) < cap(lat) {
				lat = append(lat, time.Since(t0))
			}
		}
		cpuDone()
		slices.Sort(lat)
		if len(lat) > 0 {
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-us")
			b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-us")
		}
	}
	runParallel := func(b *testing.B, addr string) {
		c := &fasthttp.HostClient{Addr: addr, MaxConns: 64}
		b.SetParallelism(16)
		b.ReportAllocs()
		defer reportCPU(b)() // after RunParallel: its workers are done
		b.RunParallel(func(pb *testing.PB) {
			req, resp := request(addr), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			for pb.Next() {
				if err := c.Do(req, resp); err != nil || resp.StatusCode() != 200 {
					b.Errorf("status %d, err %v", resp.StatusCode(), err)
					return
				}
			}
		})
	}
	proxy := func(b *testing.B, pol string) string {
		return serveBenchProxy(b, pol, "http://"+up, "http://"+up2)
	}
	b.Run("direct", func(b *testing.B) { run(b, up) })
	for _, pol := range []string{"least_inflight", "probe"} {
		b.Run("proxy/"+pol, func(b *testing.B) { run(b, proxy(b, pol)) })
	}
	b.Run("parallel/direct", func(b *testing.B) { runParallel(b, up) })
	for _, pol := range []string{"least_inflight", "probe"} {
		b.Run("parallel/proxy/"+pol, func(b *testing.B) { runParallel(b, proxy(b, pol)) })
	}
}

// reportCPU starts measuring the process's CPU time; the function it
// returns reports it per b.N as cpu-us/op and usr-us/op.
func reportCPU(b *testing.B) func() {
	cpu0, usr0 := processCPU(), processUserCPU()
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
			b.ReportMetric(float64((processUserCPU()-usr0).Microseconds())/float64(b.N), "usr-us/op")
		}
	}
}

// serveBenchProxy serves a proxy with policy pol in front of backends on
// 127.0.0.1 (no access log) until b's cleanup, and returns its address.
func serveBenchProxy(b testing.TB, pol string, backends ...string) string {
	b.Helper()
	cfg := config.Default()
	cfg.Backends.Static = backends
	cfg.Route.Policy = pol
	cfg.Log.Access = false
	p, err := New(Options{Config: cfg})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = p.Serve(ln) }()
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = p.Shutdown(ctx)
	})
	return ln.Addr().String()
}
