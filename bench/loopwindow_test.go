package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// TestOpenLoopWindowsShowWhenLatencyRose: an upstream that answers the
// requests of the run's middle (the 85th to the 115th of about 200, sent
// 425-575 ms into it) slowly; the windows show it there and not at the
// start, every request is in one window, and the slow ones are counted
// in flight at the slow window's end.
func TestOpenLoopWindowsShowWhenLatencyRose(t *testing.T) {
	const slow = 250 * time.Millisecond
	var seen atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if i := seen.Add(1); i >= 85 && i <= 115 {
			time.Sleep(slow)
		}
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	run, wins := OpenLoopWindows(context.Background(), srv.URL+"/v1/completions", 200, time.Second, 200*time.Millisecond, false, 0, 0)
	if len(wins) != 6 {
		t.Fatalf("%d windows, want 6 (1 s in 200 ms, and one for the end)", len(wins))
	}
	sent := 0
	for _, w := range wins {
		sent += w.Sent
	}
	if uint64(sent) != run.Requests || run.Requests < 150 {
		t.Fatalf("windows hold %d requests, the run %d (want ~200)", sent, run.Requests)
	}
	worst := 0
	for i, w := range wins {
		if w.P50 > wins[worst].P50 {
			worst = i
		}
	}
	ms := float64(slow / time.Millisecond)
	if worst < 1 || worst > 4 || wins[worst].P50 < ms || wins[0].P50 >= ms {
		t.Errorf("windows %+v: want the slow answers' p50 (>= %.0f ms) in window 2 (or up to two later, on a loaded machine), not in the first", wins, ms)
	}
	if wins[worst].InFlight == 0 {
		t.Errorf("windows %+v: nothing in flight at the slow window's end", wins)
	}
}
