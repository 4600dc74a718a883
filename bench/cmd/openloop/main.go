// Command openloop offers the overhead scenario's open-loop load by hand:
// vegeta's library at a constant rate, the bench's POST, with the bench's
// lean transport (or net/http's, as the vegeta command line uses), and
// prints the run as JSON (achieved rate, latency quantiles in ms). See
// bench/README.md, "Overhead".
//
//	go run ./bench/cmd/openloop -rate 10000 -duration 3s http://127.0.0.1:PORT/v1/completions
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/probegate/probegate/bench"
)

func main() {
	fs := flag.NewFlagSet("openloop", flag.ExitOnError)
	rate := fs.Int("rate", 10000, "requests per second offered")
	dur := fs.Duration("duration", 3*time.Second, "length of the run")
	window := fs.Duration("window", 0, "also print the run split by send time into windows this long (latency quantiles, in flight at each window's end), one JSON line each")
	maxWorkers := fs.Int("max-workers", 0, "at most this many requests in flight, so at most this many connections (0: the overhead scenario's 512; at or below 64 the connection count is fixed and the generator sends late once all are busy)")
	warmup := fs.Duration("warmup", -1, "before the run, offer the rate this long on the same connections, not measured (negative: the bench's, a third of -duration, at most 1 s; 0: none, the run opens its connections as it goes)")
	netHTTP := fs.Bool("nethttp", false, "send through net/http's Transport (as the vegeta command line does) instead of the bench's lean transport")
	_ = fs.Parse(os.Args[1:])
	if fs.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: openloop [-rate N] [-duration D] [-window W] [-max-workers N] [-warmup D] [-nethttp] URL")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	w := *warmup
	if w < 0 {
		w = bench.WarmupFor(*dur)
	}
	if *window > 0 {
		run, wins := bench.OpenLoopWindows(ctx, fs.Arg(0), *rate, *dur, *window, *netHTTP, *maxWorkers, w)
		for _, w := range wins {
			b, _ := json.Marshal(w)
			fmt.Println(string(b))
		}
		b, _ := json.Marshal(run)
		fmt.Println(string(b))
		return
	}
	g := bench.NewLoopGen(fs.Arg(0), *netHTTP, *maxWorkers)
	defer g.Close()
	g.Warm(ctx, *rate, w)
	b, _ := json.Marshal(g.Run(ctx, *rate, *dur, nil))
	fmt.Println(string(b))
}
