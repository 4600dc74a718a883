package bench

import (
	"fmt"
	"time"

	"github.com/probegate/probegate/internal/vllmsim"
)

// traceVariants returns the trace scenario's entries: the trace replayed
// open loop at its own arrival times (divided by -trace-speed) against the
// homogeneous trace fleet and the hetero one (a quarter of the servers, at
// least one, 2x slower), behind R = 1 and R = 8 proxy replicas: trace_r1,
// trace_r8, trace_hetero_r1, trace_hetero_r8. Each seed replays its own
// window of dur x speed of trace time, the first at -trace-offset, the
// next right after it.
func traceVariants(o *Options, dur time.Duration) []variant {
	n := defaultTraceServers
	if o.serversSet {
		n = o.Servers
	}
	speed := o.TraceSpeed
	if speed <= 0 {
		speed = DefaultTraceSpeed
	}
	span := time.Duration(float64(dur) * speed)
	sim := baseSim()
	sim.NumGPUBlocks = traceGPUBlocks
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
					"trace_window_s": span.Seconds(), "trace_speed": speed, "replicas": r, "slow_servers": slow, "slowdown": 2,
					"windows": "seed k replays trace time [offset + k*window, offset + (k+1)*window)",
					"sizes":   "the trace's ContextTokens and GeneratedTokens, exact (ignore_eos)"},
				setup:      su,
				segs:       []Segment{{Dur: dur}},
				work:       Workload{Model: vllmsim.DefaultConfig().Model, Replicas: r},
				trace:      o.trace,
				traceOff:   o.TraceOffset,
				traceSpan:  span,
				traceSpeed: speed,
				firstSeed:  o.Seed,
			}
			if !hetero {
				delete(v.params, "slowdown")
			}
			out = append(out, v)
		}
	}
	return out
}
