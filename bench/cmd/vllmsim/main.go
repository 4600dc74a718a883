// Command vllmsim runs N simulated vLLM servers (package bench/vllmsim) in one
// process, on host:port .. host:port+N-1, until SIGINT or SIGTERM.
//
//	go run ./bench/cmd/vllmsim -n 4 -port 8000 -lora sql-lora,chat-lora -time-scale 0.5
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/probegate/probegate/internal/vllmsim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run parses args, starts the fleet and serves until ctx ends. It returns the exit
// status: 0 after a clean stop, 2 for bad flags, 1 when the fleet fails.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	d := vllmsim.DefaultConfig()
	fs := flag.NewFlagSet("vllmsim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("n", 1, "number of servers")
	port := fs.Int("port", 8000, "port of the first server; server i listens on port+i (0: ephemeral)")
	host := fs.String("host", "127.0.0.1", "listen host")
	probeDelay := fs.Duration("probe-delay", 0, "delay every /metrics and /load answer")
	probeHang := fs.Bool("probe-hang", false, "never answer /metrics and /load")
	failRate := fs.Float64("fail-rate", 0, "share of completion requests answered 500 (0..1)")
	slowdown := fs.Float64("slowdown", 1, "engine steps take this many times longer (>= 1)")
	metricsInterval := fs.Duration("metrics-interval", 0, "refresh /metrics gauges at most this often (lagging exporter)")
	hang := fs.Bool("hang", false, "accept completion requests and never answer")
	model := fs.String("model", d.Model, "base model name")
	lora := fs.String("lora", "", "comma-separated LoRA adapter names")
	maxLoras := fs.Int("max-loras", d.MaxLoRAs, "adapters loaded / in one batch at once")
	maxNumSeqs := fs.Int("max-num-seqs", d.MaxNumSeqs, "running batch cap")
	maxBatched := fs.Int("max-num-batched-tokens", d.MaxNumBatchedTokens, "token budget per step")
	kvBlocks := fs.Int("kv-blocks", d.NumGPUBlocks, "KV cache blocks")
	blockSize := fs.Int("block-size", d.BlockSize, "KV cache block size in tokens")
	timeScale := fs.Float64("time-scale", 1, "multiply every simulated duration (0.1 = 10x faster)")
	seed := fs.Int64("seed", 0, "seed; server i uses seed+i")
	lowercase := fs.Bool("lowercase-headers", true, "write response header names in lowercase, as uvicorn (vLLM's server) does; false: Go's canonical case")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var problems []string
	check := func(ok bool, msg string, a ...any) {
		if !ok {
			problems = append(problems, fmt.Sprintf(msg, a...))
		}
	}
	check(fs.NArg() == 0, "unexpected arguments: %q", fs.Args())
	check(*n >= 1, "-n: must be >= 1, got %d", *n)
	check(*port >= 0 && *port+*n-1 <= 65535, "-port: %d..%d is not a valid port range", *port, *port+*n-1)
	check(*probeDelay >= 0, "-probe-delay: must be >= 0, got %v", *probeDelay)
	check(*failRate >= 0 && *failRate <= 1, "-fail-rate: must be in [0,1], got %g", *failRate)
	check(*slowdown >= 1, "-slowdown: must be >= 1, got %g", *slowdown)
	check(*metricsInterval >= 0, "-metrics-interval: must be >= 0, got %v", *metricsInterval)
	check(*model != "", "-model: must not be empty")
	check(*maxLoras >= 1, "-max-loras: must be >= 1, got %d", *maxLoras)
	check(*maxNumSeqs >= 1, "-max-num-seqs: must be >= 1, got %d", *maxNumSeqs)
	check(*maxBatched >= 1, "-max-num-batched-tokens: must be >= 1, got %d", *maxBatched)
	check(*kvBlocks >= 1, "-kv-blocks: must be >= 1, got %d", *kvBlocks)
	check(*blockSize >= 1, "-block-size: must be >= 1, got %d", *blockSize)
	check(*timeScale > 0, "-time-scale: must be > 0, got %g", *timeScale)
	var loras []string
	if *lora != "" {
		for _, l := range strings.Split(*lora, ",") {
			l = strings.TrimSpace(l)
			check(l != "", "-lora: empty adapter name in %q", *lora)
			loras = append(loras, l)
		}
	}
	cfg := d
	cfg.Model, cfg.LoRAs, cfg.MaxLoRAs = *model, loras, *maxLoras
	cfg.MaxNumSeqs, cfg.MaxNumBatchedTokens = *maxNumSeqs, *maxBatched
	cfg.NumGPUBlocks, cfg.BlockSize = *kvBlocks, *blockSize
	cfg.TimeScale, cfg.Seed = *timeScale, *seed
	cfg.LowercaseHeaders = *lowercase
	cfg.Faults = vllmsim.Faults{ProbeDelay: *probeDelay, ProbeHang: *probeHang, FailRate: *failRate,
		Slowdown: *slowdown, MetricsInterval: *metricsInterval, Hang: *hang}
	if len(problems) == 0 {
		if err := cfg.Validate(); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(stderr, "vllmsim:", p)
		}
		return 2
	}

	fleet, err := vllmsim.StartFleet(*n, *host, *port, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "vllmsim:", err)
		return 1
	}
	for _, u := range fleet.URLs() {
		fmt.Fprintln(stdout, "vllmsim: serving", cfg.Model, "at", u)
	}
	<-ctx.Done()
	fmt.Fprintln(stdout, "vllmsim: stopping")
	fleet.Close()
	return 0
}
