package vllmsim

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

const fleetChildEnv = "VLLMSIM_FLEET_CHILD"

func cpuNow() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runFleetChild runs in a child process started by BenchmarkFleetCPU: it starts
// the fleet, prints "URLS u1 u2 ..." and "CPU0 ns", serves until stdin closes,
// then prints "CPU1 ns TOKENS n" and exits. Measuring in a separate process keeps
// the load generator's CPU out of the figure.
func runFleetChild() int {
	n, _ := strconv.Atoi(os.Getenv(fleetChildEnv))
	f, err := StartFleet(n, "127.0.0.1", 0, DefaultConfig())
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	if path := os.Getenv("VLLMSIM_CPUPROFILE"); path != "" {
		pf, err := os.Create(path)
		if err == nil {
			_ = pprof.StartCPUProfile(pf)
			defer pprof.StopCPUProfile()
		}
	}
	fmt.Println("URLS", strings.Join(f.URLs(), " "))
	fmt.Println("CPU0", int64(cpuNow()))
	_, _ = io.Copy(io.Discard, os.Stdin)
	cpu := cpuNow()
	var tokens int64
	for _, s := range f.Servers() {
		st := s.Stats()
		tokens += st.GenerationTokens
	}
	fmt.Println("CPU1", int64(cpu), "TOKENS", tokens)
	f.Close()
	return 0
}

// BenchmarkFleetCPU measures the simulator's own CPU cost: 16 servers at time
// scale 1 in a child process, carrying 200 concurrent streaming requests from this
// process for 5 s. It reports the child's CPU time per generated token and the
// share of one core it used.
//
//	go test -run '^$' -bench FleetCPU -benchtime 1x ./bench/vllmsim/
func BenchmarkFleetCPU(b *testing.B) {
	const servers, streams, dur = 16, 200, 5 * time.Second
	for b.Loop() {
		cmd := exec.Command(os.Args[0], "-test.run", "^$")
		cmd.Env = append(os.Environ(), fleetChildEnv+"="+strconv.Itoa(servers))
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(stdout)
		var urls []string
		var cpu0 int64
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) > 0 && f[0] == "URLS" {
				urls = f[1:]
			}
			if len(f) == 2 && f[0] == "CPU0" {
				cpu0, _ = strconv.ParseInt(f[1], 10, 64)
				break
			}
		}
		if len(urls) != servers {
			b.Fatalf("child did not start: %v", urls)
		}
		tr := &http.Transport{MaxIdleConnsPerHost: streams}
		client := &http.Client{Transport: tr}
		var wg sync.WaitGroup
		var reqs, errs atomic.Int64
		clientCPU0 := cpuNow()
		deadline := time.Now().Add(dur)
		for i := range streams {
			wg.Go(func() {
				url := urls[i%servers] + "/v1/completions"
				for k := 0; time.Now().Before(deadline); k++ {
					body := fmt.Sprintf(`{"model":"meta-llama/Llama-3.1-8B-Instruct","prompt":"client %d request %d: %s","max_tokens":128,"stream":true}`,
						i, k, strings.Repeat("lorem ipsum ", 40))
					resp, err := client.Post(url, "application/json", strings.NewReader(body))
					if err != nil {
						errs.Add(1)
						continue
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					reqs.Add(1)
				}
			})
		}
		wg.Wait()
		clientCPU := cpuNow() - clientCPU0
		_ = stdin.Close()
		var cpu1, tokens int64
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 4 && f[0] == "CPU1" {
				cpu1, _ = strconv.ParseInt(f[1], 10, 64)
				tokens, _ = strconv.ParseInt(f[3], 10, 64)
			}
		}
		_ = cmd.Wait()
		tr.CloseIdleConnections()
		elapsed := dur.Seconds()
		simCPU := time.Duration(cpu1 - cpu0)
		b.ReportMetric(float64(simCPU.Nanoseconds())/float64(max(tokens, 1)), "sim-cpu-ns/token")
		b.ReportMetric(simCPU.Seconds()/elapsed, "sim-cores")
		b.ReportMetric(float64(tokens)/elapsed, "tokens/s")
		b.ReportMetric(clientCPU.Seconds()/elapsed, "client-cores")
		b.Logf("%d servers, %d streams, %v: %d requests (%d errors), %d tokens, simulator CPU %v (%.1f%% of a core), %.1f µs/token; client CPU %v",
			servers, streams, dur, reqs.Load(), errs.Load(), tokens, simCPU.Round(time.Millisecond),
			100*simCPU.Seconds()/elapsed, float64(simCPU.Microseconds())/float64(max(tokens, 1)), clientCPU.Round(time.Millisecond))
	}
}

// BenchmarkMetricsScrape measures rendering one /metrics answer (the cost every
// scraping proxy imposes on the simulator).
func BenchmarkMetricsScrape(b *testing.B) {
	cfg := DefaultConfig()
	cfg.LoRAs = []string{"sql-lora", "chat-lora"}
	s := NewServer(cfg)
	if err := s.Start("127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	g := s.gen.Load()
	w := &discardResponse{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		g.writeMetrics(w)
	}
	b.ReportMetric(float64(w.n)/float64(b.N), "bytes/scrape")
}

type discardResponse struct {
	h http.Header
	n int
}

func (d *discardResponse) Header() http.Header         { return d.h }
func (d *discardResponse) WriteHeader(int)             {}
func (d *discardResponse) Write(p []byte) (int, error) { d.n += len(p); return len(p), nil }
