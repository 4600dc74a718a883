package bench

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// traceEntry returns the entry name of traceVariants(o, dur, capacity).
func traceEntry(t *testing.T, o *Options, dur time.Duration, capacity float64, name string) variant {
	t.Helper()
	for _, v := range traceVariants(o, dur, capacity) {
		if v.name == name {
			return v
		}
	}
	t.Fatalf("no entry %s", name)
	return variant{}
}

// The calibrated replay (the default): every seed offers load x capacity x
// duration requests, the trace's consecutive rows from the offset on, one
// seed's run after the other's, wrapping around the trace's end, with the
// trace's own gaps scaled by one factor to span the duration.
func TestTraceCalibratedWindows(t *testing.T) {
	rows := []TraceRow{{0, 10, 1}, {time.Second, 11, 1}, {3 * time.Second, 12, 1}, {4 * time.Second, 13, 1},
		{8 * time.Second, 14, 1}, {9 * time.Second, 15, 1}, {11 * time.Second, 16, 1}, {12 * time.Second, 17, 1}}
	o := &Options{Seed: 1, Seeds: 3, TraceOffset: 2 * time.Second, TraceLoad: 0.5, trace: rows}
	// 0.5 x 0.8 req/s x 10 s = 4 requests a seed.
	v := traceEntry(t, o, 10*time.Second, 0.8, "trace_hetero_r1")
	if v.traceRows != 4 || v.params["trace_rows_per_seed"] != 4 || v.params["load"] != 0.5 {
		t.Fatalf("rows per seed %d, params %v; want 4 rows at load 0.5", v.traceRows, v.params)
	}
	if got := v.offered(); math.Abs(got-0.4) > 1e-9 {
		t.Fatalf("offered %v req/s, want 0.5 x 0.8", got)
	}
	prompts := func(w []TraceRow) []int {
		var p []int
		for _, r := range w {
			p = append(p, r.Prompt)
		}
		return p
	}
	// Seed 1 starts at the first row at or after 2 s (prompt 12); the
	// trace's gaps 1 s, 4 s, 1 s (6 s) span 10 s x 3/4 = 7.5 s.
	w1 := v.window(1)
	if !slices.Equal(prompts(w1), []int{12, 13, 14, 15}) {
		t.Fatalf("seed 1 replays %v", prompts(w1))
	}
	wantAt := []time.Duration{0, 1250 * time.Millisecond, 6250 * time.Millisecond, 7500 * time.Millisecond}
	for i, r := range w1 {
		if r.At != wantAt[i] {
			t.Fatalf("seed 1 arrivals %v, want %v", w1, wantAt)
		}
	}
	// Seed 2 continues and wraps: 16, 17, then 10, 11 (the wrap's gap is
	// the trace's mean gap, 12 s / 7).
	w2 := v.window(2)
	if !slices.Equal(prompts(w2), []int{16, 17, 10, 11}) {
		t.Fatalf("seed 2 replays %v", prompts(w2))
	}
	if last := w2[len(w2)-1].At; last != 7500*time.Millisecond || w2[0].At != 0 {
		t.Fatalf("seed 2 spans %v..%v, want 0..7.5s", w2[0].At, last)
	}
	speeds, _ := v.params["trace_speed_by_seed"].([]float64)
	if len(speeds) != 3 || math.Abs(speeds[0]-0.8) > 1e-3 {
		t.Fatalf("trace_speed_by_seed %v, want 3 speeds, the first 6 s / 7.5 s", speeds)
	}
	// Every entry and every strategy replays the same requests.
	if r8 := traceEntry(t, o, 10*time.Second, 0.8, "trace_r8"); !slices.Equal(r8.window(3), v.window(3)) {
		t.Fatal("trace_r8 and trace_hetero_r1 replay different rows")
	}
	// Before the capacity is measured (0), a placeholder of 2 rows.
	if v0 := traceEntry(t, o, 10*time.Second, 0, "trace_r1"); v0.traceRows != 2 {
		t.Fatalf("rows before capacity %d", v0.traceRows)
	}
}

// -trace-rows fixes the rows per seed whatever the measured capacity, so
// that seed k replays the same requests in two runs whose capacity
// measurements differ.
func TestTraceRowsFixedWhateverTheCapacity(t *testing.T) {
	rows := make([]TraceRow, 50)
	for i := range rows {
		rows[i] = TraceRow{At: time.Duration(i) * time.Second, Prompt: 100 + i, Output: 1}
	}
	o := &Options{Seed: 1, Seeds: 2, TraceLoad: 0.7, TraceRows: 6, trace: rows}
	a := traceEntry(t, o, 10*time.Second, 1.15, "trace_hetero_r8")
	b := traceEntry(t, o, 10*time.Second, 1.16, "trace_hetero_r8")
	if a.traceRows != 6 || b.traceRows != 6 {
		t.Fatalf("rows per seed %d and %d, want 6", a.traceRows, b.traceRows)
	}
	if !slices.Equal(a.window(2), b.window(2)) {
		t.Fatal("seed 2 replays different rows at capacity 1.15 and 1.16")
	}
	// Without it, the two capacities give 8 and 8.12 -> 8 rows: the same
	// here, but 11.5 and 11.6 req/s at 20 s give 161 and 162.
	o.TraceRows = 0
	if c := traceEntry(t, o, 20*time.Second, 11.5, "trace_r1"); c.traceRows != 161 {
		t.Fatalf("calibrated rows %d, want 161", c.traceRows)
	}
	if c := traceEntry(t, o, 20*time.Second, 11.6, "trace_r1"); c.traceRows != 162 {
		t.Fatalf("calibrated rows %d, want 162", c.traceRows)
	}
	// Rows fixed by -trace-rows need no capacity, so none is measured
	// (40 s of closed loop per invocation); the calibrated rows do.
	if sizesOf("trace_hetero_r8", o) != traceFleetCapacity {
		t.Fatal("the calibrated replay needs the trace fleet's capacity")
	}
	o.TraceRows = 6
	if k := sizesOf("trace_hetero_r8", o); k != "" {
		t.Fatalf("fixed rows per seed measure the capacity of %q, want none", k)
	}
	o.TraceRows = 0
	if _, err := Run(context.Background(), Options{Scenario: "trace", TraceRows: -1, Out: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "-trace-rows") {
		t.Fatalf("negative -trace-rows: %v", err)
	}
}

// -trace-speed keeps the fixed-speed replay: seed k's window of
// duration x speed of trace time, at the trace's times divided by speed.
func TestTraceFixedSpeedWindows(t *testing.T) {
	rows := []TraceRow{{0, 10, 1}, {time.Second, 11, 1}, {3 * time.Second, 12, 1}, {4 * time.Second, 13, 1},
		{8 * time.Second, 14, 1}, {9 * time.Second, 15, 1}}
	o := &Options{Seed: 1, Seeds: 2, TraceOffset: time.Second, TraceSpeed: 2, trace: rows}
	v := traceEntry(t, o, 2*time.Second, 123, "trace_hetero_r8")
	if v.traceRows != 0 || v.params["trace_speed"] != 2.0 || v.params["trace_window_s"] != 4.0 {
		t.Fatalf("fixed speed entry: rows %d, params %v", v.traceRows, v.params)
	}
	if got, want := v.window(1), TraceWindow(rows, time.Second, 4*time.Second, 2); !slices.Equal(got, want) {
		t.Fatalf("seed 1 window %v, want %v", got, want)
	}
	if got, want := v.window(2), TraceWindow(rows, 5*time.Second, 4*time.Second, 2); !slices.Equal(got, want) {
		t.Fatalf("seed 2 window %v, want %v", got, want)
	}
	if sizesOf("trace", o) != "" {
		t.Fatal("a fixed-speed replay needs no capacity")
	}
	o.TraceSpeed = 0
	if sizesOf("trace", o) != traceFleetCapacity {
		t.Fatal("the calibrated replay needs the trace fleet's capacity")
	}
}
