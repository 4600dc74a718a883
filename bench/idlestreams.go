package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// IdleStreams is one measurement of a probegate build holding idle SSE
// streams, by the overhead scenario's procedure (measureRSS): RSS before
// and with the streams open, and the proxy's own Go runtime figures read
// from its /metrics with the streams open, to split the cost between
// goroutine stacks and heap.
type IdleStreams struct {
	Bin           string  `json:"bin"`
	Streams       int     `json:"streams"`
	RSSIdleMiB    float64 `json:"rss_idle_mib"`
	RSSStreamsMiB float64 `json:"rss_streams_mib"`
	KiBPerStream  float64 `json:"kib_per_stream"`
	StackKiB      float64 `json:"stack_kib_per_stream"`      // go_memstats_stack_inuse_bytes / streams
	HeapInuseKiB  float64 `json:"heap_inuse_kib_per_stream"` // go_memstats_heap_inuse_bytes / streams
	HeapAllocKiB  float64 `json:"heap_alloc_kib_per_stream"` // go_memstats_heap_alloc_bytes / streams
	GoroutinesPer float64 `json:"goroutines_per_stream"`
	Note          string  `json:"note,omitempty"`
}

// MeasureIdleStreams starts bin (a probegate binary, least_inflight), opens
// n idle SSE streams through it and reports what they cost. The upstream
// runs as a child process: the calling program must call
// ServeUpstreamIfChild first in main. The caller raises the open-files
// limit (RaiseNoFile) and bounds n (MaxIdleStreams).
func MeasureIdleStreams(ctx context.Context, bin string, n int, profDir string) (*IdleStreams, error) {
	dir, err := os.MkdirTemp("", "probegate-idlestreams-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var res OverheadResult
	out := &IdleStreams{Bin: bin}
	var m map[string]float64
	err = measureRSS(ctx, bin, dir, n, &res, nil, profDir, func(admin string) {
		m, _ = readGoMetrics(ctx, admin)
	})
	out.Streams = res.StreamsOpened
	out.RSSIdleMiB, out.RSSStreamsMiB = res.RSSIdleMiB, res.RSSStreamsMiB
	if s := float64(res.StreamsOpened); s > 0 {
		out.KiBPerStream = round3((res.RSSStreamsMiB - res.RSSIdleMiB) * 1024 / s)
		out.StackKiB = round3(m["go_memstats_stack_inuse_bytes"] / 1024 / s)
		out.HeapInuseKiB = round3(m["go_memstats_heap_inuse_bytes"] / 1024 / s)
		out.HeapAllocKiB = round3(m["go_memstats_heap_alloc_bytes"] / 1024 / s)
		out.GoroutinesPer = round3(m["go_goroutines"] / s)
	}
	if err != nil {
		out.Note = err.Error()
	}
	return out, err
}

// readGoMetrics reads the unlabelled Go runtime gauges of a probegate
// admin listener's /metrics.
func readGoMetrics(ctx context.Context, admin string) (map[string]float64, error) {
	m := map[string]float64{}
	err := scrapeAdmin(ctx, admin, 10*time.Second, func(sc *bufio.Scanner) error {
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "go_") {
				continue
			}
			name, val, ok := strings.Cut(line, " ")
			if !ok || strings.Contains(name, "{") {
				continue
			}
			if f, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
				m[name] = f
			}
		}
		return sc.Err()
	})
	if err == nil && len(m) == 0 {
		err = fmt.Errorf("no go_ metrics at %s/metrics", admin)
	}
	return m, err
}

// RaiseNoFile lifts the open-files limit as far as allowed.
func RaiseNoFile() { raiseNoFile() }

// MaxIdleStreams is how many idle streams fit the open-files limit.
func MaxIdleStreams(want int) int { return maxStreams(want) }
