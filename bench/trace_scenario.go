package bench

import (
	"fmt"
	"math"
	"time"

	"github.com/probegate/probegate/internal/vllmsim"
)

// traceFleetCapacity is the capacity entry (Results.Fleet.CapacityBySizes)
// of the trace fleet with the trace's sizes, which the calibrated replay's
// load is a multiple of.
const traceFleetCapacity = "trace_fleet"

// traceServers is the trace fleet's size: -servers if given, else the
// issue's "4 pods".
func traceServers(o *Options) int {
	if o.serversSet {
		return o.Servers
	}
	return defaultTraceServers
}

// traceVariants returns the trace scenario's entries: the trace replayed
// open loop against the homogeneous trace fleet and the hetero one (a
// quarter of the servers, at least one, 2x slower), behind R = 1 and R = 8
// proxy replicas: trace_r1, trace_r8, trace_hetero_r1, trace_hetero_r8.
//
// Two replays:
//   - calibrated (o.TraceSpeed 0, the default): seed k replays the next
//     n = load x capacity x dur rows of the trace (rows rather than trace
//     time, so every seed offers the same number of requests), the first
//     seed from the first row at -trace-offset, each further seed the n
//     rows after the previous one's, wrapping around the trace's end; the
//     rows' arrival gaps are all scaled by one factor so that they span
//     dur. The mean offered load is then load x capacity in every seed,
//     while the trace's bursts keep their shape. capacity is the trace
//     fleet's, measured closed loop with the trace's sizes
//     (traceFleetCapacity); 0 before it is measured.
//   - fixed speed (o.TraceSpeed > 0): seed k replays its own window of
//     dur x speed of trace time, the first at -trace-offset, the next right
//     after it, at the trace's arrival times divided by the speed. At real
//     time the code trace's windows overload the fleet (see
//     DefaultTraceSpeed).
func traceVariants(o *Options, dur time.Duration, capacity float64) []variant {
	n := traceServers(o)
	speed := o.TraceSpeed
	load := o.TraceLoad
	if load <= 0 {
		load = DefaultTraceLoad
	}
	rows := 0
	if speed <= 0 {
		rows = max(int(math.Round(load*capacity*dur.Seconds())), 2)
		if o.TraceRows > 0 {
			rows = o.TraceRows
		}
	}
	span := time.Duration(float64(dur) * speed)
	sim := sizedSim(SizesTrace)
	file := o.TraceFile
	if file == "" {
		file = "bench/testdata/azure_code_2023_slice.csv (embedded)"
	}
	var out []variant
	for _, hetero := range []bool{false, true} {
		for _, r := range []int{1, 8} {
			su := Setup{Servers: n, Sim: sim, Replicas: r}
			name := fmt.Sprintf("trace_r%d", r)
			slow := 0
			if hetero {
				name = fmt.Sprintf("trace_hetero_r%d", r)
				slow = max(n/4, 1)
				su.Faults = map[int]vllmsim.Faults{}
				for i := range slow {
					su.Faults[n-1-i] = vllmsim.Faults{Slowdown: 2}
				}
			}
			v := variant{
				name: name,
				params: map[string]any{"scenario": "trace", "trace": file, "trace_offset_s": o.TraceOffset.Seconds(),
					"replicas": r, "slow_servers": slow, "slowdown": 2,
					"sizes": "the trace's ContextTokens and GeneratedTokens, exact (ignore_eos)"},
				setup:      su,
				segs:       []Segment{{Dur: dur}},
				work:       Workload{Model: vllmsim.DefaultConfig().Model, Replicas: r},
				trace:      o.trace,
				traceOff:   o.TraceOffset,
				traceSpan:  span,
				traceSpeed: speed,
				traceRows:  rows,
				firstSeed:  o.Seed,
			}
			if rows > 0 {
				v.params["load"] = load
				if o.TraceRows > 0 {
					v.params["load"] = "fixed rows per seed (-trace-rows)"
				}
				v.params["trace_rows_per_seed"] = rows
				v.params["windows"] = "seed k replays the k-th run of trace_rows_per_seed rows from the first row at trace_offset_s, gaps scaled to span the duration"
				var speeds []float64
				for k := range max(o.Seeds, 1) {
					speeds = append(speeds, round3(v.replaySpeed(o.Seed+int64(k))))
				}
				v.params["trace_speed_by_seed"] = speeds
			} else {
				v.params["trace_speed"] = speed
				v.params["trace_window_s"] = span.Seconds()
				v.params["windows"] = "seed k replays trace time [offset + k*window, offset + (k+1)*window)"
			}
			if !hetero {
				delete(v.params, "slowdown")
			}
			out = append(out, v)
		}
	}
	return out
}

// CalibratedTraceWindow is window k (from 0) of the calibrated replay:
// the k-th run of n consecutive rows of trace from the first row at or
// after offset (the first row if none), wrapping around the trace's end,
// in replay order, with their arrival gaps (a wrap-around gap taken as the
// trace's mean gap) scaled by one factor so that the n arrivals span dur:
// the first at 0, the last at dur x (n-1)/n. The rows' At are those scaled
// arrival offsets. The trace scenario's seed s replays window s - -seed,
// so its k-th seed window k-1.
func CalibratedTraceWindow(trace []TraceRow, offset time.Duration, n, k int, dur time.Duration) []TraceRow {
	rows := traceRun(trace, offset, n, k)
	gaps, total := traceGaps(trace, rows)
	scale := 0.0
	if total > 0 {
		scale = float64(dur) * float64(len(rows)-1) / float64(len(rows)) / float64(total)
	}
	var at time.Duration
	for i := range rows {
		at += gaps[i]
		rows[i].At = time.Duration(float64(at) * scale)
	}
	return rows
}

// rowsWindow returns the calibrated replay of seed: window seed - firstSeed
// of traceRows rows from traceOff, spanning schedDur.
func (v *variant) rowsWindow(seed int64) []TraceRow {
	return CalibratedTraceWindow(v.trace, v.traceOff, v.traceRows, int(seed-v.firstSeed), v.schedDur())
}

// traceRun returns the n rows of window k, with their arrival times from
// the trace (not yet rebased or scaled), in replay order: the k-th run of n
// consecutive rows from the first row at or after offset, wrapping around
// the trace's end.
func traceRun(trace []TraceRow, offset time.Duration, n, k int) []TraceRow {
	first := len(trace)
	for i, r := range trace {
		if r.At >= offset {
			first = i
			break
		}
	}
	if first == len(trace) {
		first = 0
	}
	out := make([]TraceRow, n)
	start := first + k*n
	for i := range out {
		out[i] = trace[(start+i)%len(trace)]
	}
	return out
}

// traceGaps returns each of rows' gap to the previous one (0 for the first;
// trace's mean gap where the run wraps around its end) and their sum.
func traceGaps(trace, rows []TraceRow) ([]time.Duration, time.Duration) {
	gaps := make([]time.Duration, len(rows))
	var total time.Duration
	for i := 1; i < len(rows); i++ {
		g := rows[i].At - rows[i-1].At
		if g < 0 {
			g = TraceDuration(trace) / time.Duration(max(len(trace)-1, 1))
		}
		gaps[i] = g
		total += g
	}
	return gaps, total
}

// replaySpeed is the calibrated replay's speed for seed: trace time over
// replay time (1 is real time).
func (v *variant) replaySpeed(seed int64) float64 {
	rows := traceRun(v.trace, v.traceOff, v.traceRows, int(seed-v.firstSeed))
	_, total := traceGaps(v.trace, rows)
	replay := float64(v.schedDur()) * float64(len(rows)-1) / float64(len(rows))
	if replay <= 0 {
		return 0
	}
	return float64(total) / replay
}
