package bench

import (
	"bufio"
	"strings"
	"testing"
)

func TestParseProbeCounts(t *testing.T) {
	text := `# HELP probegate_probes_total x
probegate_probes_total{outcome="ok"} 10
probegate_probes_total{outcome="timeout"} 2
probegate_probes_total{outcome="cancelled"} 1
probegate_probes_total{outcome="hedge"} 4
probegate_probes_total{outcome="skipped_fresh"} 50
probegate_probes_total{outcome="coalesced"} 30
probegate_requests_total{backend="a",code="200"} 60
probegate_requests_total{backend="b",code="200"} 40
probegate_scrapes_total{backend="a",outcome="ok"} 7
go_gc_duration_seconds{quantile="0.5"} 0.0001
go_gc_duration_seconds_sum 0.02
go_gc_duration_seconds_count 12
`
	c, err := parseProbeCounts(bufio.NewScanner(strings.NewReader(text)))
	if err != nil || c != (probeCounts{sent: 13, timeouts: 2, coalesced: 30, requests: 100, gcCycles: 12}) {
		t.Fatalf("got %+v, %v", c, err)
	}
}
