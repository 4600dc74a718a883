package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/probegate/probegate/bench"
	"github.com/probegate/probegate/bench/fleetsim"
)

// generalFlags are the command line's settings of -general.
type generalFlags struct {
	out, pods, replicas, loads, strategies, trace string
	sizes, arrivals, fleets, lives, only, probe   string
	seats                                         string
	seed                                          int64
	dur                                           time.Duration
	seeds, requests, parallel                     int
}

// runGeneral runs the generalization sweep (fleetsim.GeneralSweep) and
// writes DIR/general.json and DIR/general.md after every cell.
func runGeneral(f generalFlags) error {
	o := fleetsim.DefaultGeneralOptions()
	o.Seed, o.Seeds, o.Requests, o.Parallel, o.Probe, o.Log = f.seed, f.seeds, f.requests, f.parallel, f.probe, os.Stderr
	if f.dur > 0 {
		o.MaxDuration = f.dur
	}
	list := func(s string, def []string) []string {
		if s == "" {
			return def
		}
		return strings.Split(s, ",")
	}
	o.Sizes, o.Arrivals, o.Fleets, o.Lives = list(f.sizes, o.Sizes), list(f.arrivals, o.Arrivals), list(f.fleets, o.Fleets), list(f.lives, o.Lives)
	o.Strategies = list(f.strategies, nil)
	var err error
	if o.Pods, err = ints(f.pods, o.Pods); err != nil {
		return err
	}
	if o.Replicas, err = ints(f.replicas, o.Replicas); err != nil {
		return err
	}
	if o.Seats, err = ints(f.seats, o.Seats); err != nil {
		return err
	}
	if f.loads != "" {
		o.Loads = nil
		for _, s := range strings.Split(f.loads, ",") {
			var l float64
			if _, err := fmt.Sscanf(strings.TrimSpace(s), "%g", &l); err != nil || l <= 0 {
				return fmt.Errorf("bad load %q", s)
			}
			o.Loads = append(o.Loads, l)
		}
	}
	if f.only != "" {
		if o.Only, err = regexp.Compile(f.only); err != nil {
			return fmt.Errorf("-only: %w", err)
		}
	}
	needTrace := false
	for _, s := range o.Sizes {
		needTrace = needTrace || strings.HasPrefix(s, "trace")
	}
	if needTrace {
		path := f.trace
		if path == "bench" {
			path = ""
		}
		if f.trace == "" {
			return fmt.Errorf("sizes trace_sizes and trace_arrivals need -trace FILE (or -trace bench for the committed slice)")
		}
		if o.Trace, err = bench.LoadTrace(path); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		return err
	}
	write := func(cells []fleetsim.GeneralCell) error {
		js, err := json.MarshalIndent(cells, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(f.out, "general.json"), append(js, '\n'), 0o644); err != nil {
			return err
		}
		var md bytes.Buffer
		fleetsim.WriteGeneralMarkdown(&md, cells, o.Probe)
		return os.WriteFile(filepath.Join(f.out, "general.md"), md.Bytes(), 0o644)
	}
	o.Progress = func(cells []fleetsim.GeneralCell) {
		if err := write(cells); err != nil {
			fmt.Fprintln(os.Stderr, "fleetsim: writing results:", err)
		}
	}
	start := time.Now()
	cells, err := fleetsim.GeneralSweep(o)
	if werr := write(cells); werr != nil && err == nil {
		err = werr
	}
	fmt.Fprintf(os.Stderr, "wrote %s/general.json and general.md (%d cells) in %v\n", f.out, len(cells), time.Since(start).Round(time.Second))
	return err
}
