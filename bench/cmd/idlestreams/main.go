// Command idlestreams measures what idle SSE streams cost in one or more
// probegate builds, by the overhead scenario's procedure: each build in
// turn (alternating, -rounds times) holds -n idle streams; RSS per stream
// and the Go runtime's stack and heap figures per stream are printed, and
// a summary of medians per build at the end.
//
//	go build -o /tmp/old . && (edit) && go build -o /tmp/new .
//	go run ./bench/cmd/idlestreams -n 9900 -rounds 3 /tmp/old /tmp/new
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/probegate/probegate/bench"
)

func main() {
	bench.ServeUpstreamIfChild()
	n := flag.Int("n", 10000, "idle streams per measurement (capped by the open-files limit)")
	rounds := flag.Int("rounds", 3, "measurements of each build, alternating between builds")
	profDir := flag.String("profile", "", "save each measurement's heap profile under this directory")
	asJSON := flag.Bool("json", false, "print each measurement as a JSON line")
	flag.Parse()
	bins := flag.Args()
	if len(bins) == 0 {
		fmt.Fprintln(os.Stderr, "usage: idlestreams [-n N] [-rounds R] BIN [BIN...]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	bench.RaiseNoFile()
	want := bench.MaxIdleStreams(*n)
	per := map[string][]float64{}
	for r := range *rounds {
		for i, bin := range bins {
			pd := ""
			if *profDir != "" {
				pd = fmt.Sprintf("%s/%d-%d", *profDir, i, r)
				_ = os.MkdirAll(pd, 0o755)
			}
			m, err := bench.MeasureIdleStreams(ctx, bin, want, pd)
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", bin, err)
			}
			if m == nil {
				continue
			}
			if *asJSON {
				b, _ := json.Marshal(m)
				fmt.Println(string(b))
			} else {
				fmt.Printf("round %d %s: %d streams, RSS %.1f -> %.1f MiB, %.1f KiB/stream (stack %.1f, heap in use %.1f, heap live %.1f KiB/stream; %.2f goroutines/stream)\n",
					r+1, bin, m.Streams, m.RSSIdleMiB, m.RSSStreamsMiB, m.KiBPerStream, m.StackKiB, m.HeapInuseKiB, m.HeapAllocKiB, m.GoroutinesPer)
			}
			per[bin] = append(per[bin], m.KiBPerStream)
			if ctx.Err() != nil {
				os.Exit(1)
			}
		}
	}
	for _, bin := range bins {
		v := per[bin]
		slices.Sort(v)
		if len(v) > 0 {
			fmt.Printf("%s: median %.1f KiB per idle stream (%v)\n", bin, v[len(v)/2], v)
		}
	}
}
