package probe

import (
	"testing"
	"time"
)

// TestSeatLimitIsTheMostRequestsReportedRunning: the seat limit is the
// largest running count any report has shown, whatever came after (fewer
// running, a report without a running count, a stale report), and 0 before
// a report showed a request running.
func TestSeatLimitIsTheMostRequestsReportedRunning(t *testing.T) {
	s := NewState("b:1")
	t0 := time.Unix(1_800_000_000, 0)
	if got := s.SeatLimit(); got != 0 {
		t.Fatalf("seat limit %d before any report, want 0", got)
	}
	at := t0
	for _, c := range []struct {
		running, waiting int
		want             int
	}{
		{0, 0, 0},
		{0, 3, 0}, // nothing running: no seat seen
		{2, 0, 2},
		{4, 3, 4},
		{3, 0, 4},
		{-1, 2, 4}, // vLLM's ORCA header: waiting only
		{1, 0, 4},
	} {
		at = at.Add(100 * time.Millisecond)
		l := Load{Running: c.running, Waiting: c.waiting, KVUse: 0.5, ServerLoad: -1, At: at, Source: SourceScrape}
		if !s.Report(&l) {
			t.Fatal("report not taken")
		}
		if got := s.SeatLimit(); got != c.want {
			t.Errorf("after running %d waiting %d: seat limit %d, want %d", c.running, c.waiting, got, c.want)
		}
	}
	// Kept when the report goes stale, as the pod's speed is.
	late := at.Add(time.Hour)
	v := s.View(late, time.Second)
	var b Brief
	s.BriefInto(&b, late.Add(-time.Second))
	if v.Source != SourceLocal || v.SeatLimit != 4 || b.SeatLimit != 4 {
		t.Errorf("stale: source %v, View.SeatLimit %d, Brief.SeatLimit %d, want local, 4, 4", v.Source, v.SeatLimit, b.SeatLimit)
	}
}
