package bench

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	tests := []struct {
		name string
		xs   []float64
		p    float64
		want float64
	}{
		{"empty", nil, 50, 0},
		{"single", []float64{7}, 99, 7},
		{"median odd", []float64{3, 1, 2}, 50, 2},
		{"median even interpolates", []float64{1, 2, 3, 4}, 50, 2.5},
		{"p0 is min", []float64{5, 9, 1}, 0, 1},
		{"p100 is max", []float64{5, 9, 1}, 100, 9},
		{"p90 of 1..10", []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 90, 9.1},
		{"p99 of 1..100", seq(100), 99, 99.01},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Percentile(tc.xs, tc.p); math.Abs(got-tc.want) > 1e-9 {
				t.Fatalf("Percentile(%v, %v) = %v, want %v", tc.xs, tc.p, got, tc.want)
			}
		})
	}
	xs := []float64{3, 1, 2}
	Percentile(xs, 50)
	if xs[0] != 3 || xs[1] != 1 {
		t.Fatal("Percentile modified its input")
	}
}

func seq(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = float64(i + 1)
	}
	return out
}

func TestQuantilesMs(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 1000; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	q := quantilesMs(ds, true)
	if math.Abs(q.P50-500.5) > 1e-6 || math.Abs(q.P99-990.01) > 1e-6 || math.Abs(q.P999-999.001) > 1e-6 || q.Mean != 500.5 {
		t.Fatalf("quantiles = %+v", q)
	}
}

// gapStats returns the count, mean gap (s) and coefficient of variation of
// the gaps of arr.
func gapStats(arr []time.Duration) (int, float64, float64) {
	var prev time.Duration
	var sum, sq float64
	for _, a := range arr {
		g := (a - prev).Seconds()
		sum += g
		sq += g * g
		prev = a
	}
	n := float64(len(arr))
	mean := sum / n
	sd := math.Sqrt(sq/n - mean*mean)
	return len(arr), mean, sd / mean
}

func TestArrivalsPoisson(t *testing.T) {
	segs := []Segment{{Rate: 200, Dur: 100 * time.Second}}
	arr := Arrivals(segs, 1, rand.New(rand.NewPCG(1, 2)))
	n, mean, cv := gapStats(arr)
	if n < 19400 || n > 20600 { // 20,000 +- 3 sigma (sigma ~ 141)
		t.Fatalf("%d arrivals, want ~20000", n)
	}
	if math.Abs(mean-0.005) > 0.0002 {
		t.Fatalf("mean gap %v, want 5ms", mean)
	}
	if math.Abs(cv-1) > 0.05 { // exponential gaps: CV 1
		t.Fatalf("CV %v, want 1 for Poisson", cv)
	}
	for i := 1; i < len(arr); i++ {
		if arr[i] < arr[i-1] || arr[i] >= 100*time.Second {
			t.Fatalf("arrival %d out of order or range: %v", i, arr[i])
		}
	}
	// Same seed, same schedule.
	again := Arrivals(segs, 1, rand.New(rand.NewPCG(1, 2)))
	if len(again) != len(arr) || again[len(again)/2] != arr[len(arr)/2] {
		t.Fatal("schedule not reproducible from its seed")
	}
}

func TestArrivalsGammaBursty(t *testing.T) {
	// Gamma gaps with shape k have CV 1/sqrt(k): burstiness 0.25 gives CV 2.
	arr := Arrivals([]Segment{{Rate: 100, Dur: 200 * time.Second}}, 0.25, rand.New(rand.NewPCG(3, 4)))
	n, mean, cv := gapStats(arr)
	if n < 18500 || n > 21500 {
		t.Fatalf("%d arrivals, want ~20000", n)
	}
	if math.Abs(mean-0.01) > 0.0005 {
		t.Fatalf("mean gap %v, want 10ms", mean)
	}
	if math.Abs(cv-2) > 0.15 {
		t.Fatalf("CV %v, want 2", cv)
	}
}

func TestArrivalsSegments(t *testing.T) {
	arr := Arrivals([]Segment{{Rate: 1000, Dur: 10 * time.Second}, {Rate: 0, Dur: 5 * time.Second}, {Rate: 100, Dur: 10 * time.Second}}, 1, rand.New(rand.NewPCG(5, 6)))
	var a, b, c int
	for _, x := range arr {
		switch {
		case x < 10*time.Second:
			a++
		case x < 15*time.Second:
			b++
		default:
			c++
		}
	}
	if a < 9500 || a > 10500 || b != 0 || c < 850 || c > 1150 {
		t.Fatalf("per segment %d %d %d, want ~10000, 0, ~1000", a, b, c)
	}
}

func TestWorkloadReproducible(t *testing.T) {
	w := baseWorkload(4)
	w.DirectShare = 0.3
	w.Replicas = 3
	arr := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	a, b := w.Build(arr, nil, 7), w.Build(arr, nil, 7)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("request %d differs between builds with one seed", i)
		}
		if a[i].MaxTokens < 16 || a[i].MaxTokens > 48 || a[i].Replica != i%3 {
			t.Fatalf("request %d: %+v", i, a[i])
		}
	}
}

func TestTextTokens(t *testing.T) {
	tests := map[string]int{
		`{"choices":[{"index":0,"text":" the","logprobs":null}]}`:             1,
		`{"choices":[{"index":0,"text":"","finish_reason":"stop"}]}`:          0,
		`{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`: 0,
		`{"choices":[{"index":0,"delta":{"content":" fox"}}]}`:                1,
		`{"choices":[{"index":0,"text":"a"},{"index":1,"text":"b"}]}`:         2,
		`{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}`:    0,
	}
	for in, want := range tests {
		if got := textTokens([]byte(in)); got != want {
			t.Errorf("textTokens(%s) = %d, want %d", in, got, want)
		}
	}
}

func TestParseWrk(t *testing.T) {
	out := `Running 3s test @ http://127.0.0.1:1/v1/completions
  2 threads and 64 connections
  Latency Distribution
     50%  453.00us
     75%    1.20ms
     90%    2.50ms
     99%    1.10s
  150000 requests in 3.00s, 30.00MB read
Requests/sec:  49999.50
Transfer/sec:     10.00MB
`
	rps, q, err := parseWrk(out)
	if err != nil || rps != 49999.5 || q.P50 != 0.453 || q.P90 != 2.5 || q.P99 != 1100 {
		t.Fatalf("parseWrk = %v %+v %v", rps, q, err)
	}
}

// TestEndToEnd runs one tiny scenario for real: 2 simulated servers, two
// strategies through real proxies on loopback, a ~3 s spike, and checks
// that results.json follows DESIGN.md's schema and the numbers are sane.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	res, err := Run(ctx, Options{Scenario: "spike", Quick: true, Seed: 3, Out: dir, Servers: 2,
		Strategies: []string{RoundRobin, Probe}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Fleet.CapacityRPS <= 0 {
		t.Fatalf("capacity %v", res.Fleet.CapacityRPS)
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc["seed"] != float64(3) {
		t.Fatalf("seed = %v", doc["seed"])
	}
	scs, _ := doc["scenarios"].([]any)
	if len(scs) != 1 {
		t.Fatalf("%d scenarios, want 1", len(scs))
	}
	sc := scs[0].(map[string]any)
	if sc["name"] != "spike" {
		t.Fatalf("scenario name %v", sc["name"])
	}
	if _, ok := sc["params"].(map[string]any); !ok {
		t.Fatal("params missing")
	}
	sts, _ := sc["strategies"].([]any)
	if len(sts) != 2 {
		t.Fatalf("%d strategies, want 2", len(sts))
	}
	for _, x := range sts {
		s := x.(map[string]any)
		for _, k := range []string{"name", "requests", "errors", "achieved_rps", "ttft_ms", "e2e_ms", "probes_per_request", "fallback_rate", "imbalance"} {
			if _, ok := s[k]; !ok {
				t.Fatalf("strategy %v lacks %q", s["name"], k)
			}
		}
		ttft := s["ttft_ms"].(map[string]any)
		e2e := s["e2e_ms"].(map[string]any)
		for _, k := range []string{"p50", "p90", "p99", "p999"} {
			if _, ok := ttft[k]; !ok {
				t.Fatalf("ttft_ms lacks %s", k)
			}
		}
		for _, k := range []string{"p50", "p90", "p99"} {
			if _, ok := e2e[k]; !ok {
				t.Fatalf("e2e_ms lacks %s", k)
			}
		}
		name := s["name"].(string)
		req, errs := s["requests"].(float64), s["errors"].(float64)
		if req < 10 || errs != 0 {
			t.Fatalf("%s: %v requests, %v errors (%v)", name, req, errs, s["error_sample"])
		}
		p50, p99, p999 := ttft["p50"].(float64), ttft["p99"].(float64), ttft["p999"].(float64)
		if !(p50 > 0 && p50 <= p99 && p99 <= p999 && p999 < 30000) {
			t.Fatalf("%s: TTFT p50 %v p99 %v p999 %v", name, p50, p99, p999)
		}
		if e2e["p50"].(float64) < p50 {
			t.Fatalf("%s: e2e p50 %v below TTFT p50 %v", name, e2e["p50"], p50)
		}
		ppr := s["probes_per_request"].(float64)
		switch name {
		case RoundRobin:
			if ppr != 0 {
				t.Fatalf("round_robin probes %v per request", ppr)
			}
		case Probe:
			if ppr <= 0 || ppr > 3 {
				t.Fatalf("probe: %v probes per request", ppr)
			}
		}
		if fr := s["fallback_rate"].(float64); fr < 0 || fr > 1 {
			t.Fatalf("%s: fallback rate %v", name, fr)
		}
	}
	for _, f := range []string{"report.md", "ttft_cdf_spike.svg"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Fatalf("%s: %v", f, err)
		}
	}
}
