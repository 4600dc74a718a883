package bench

import (
	"context"
	"fmt"
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
//
// The run is 1 s of wall clock, and a generator that falls behind stops
// there (vegeta's duration): a starved -race process (GOMAXPROCS=1 beside
// busy loops) sent 65-118 of the 200, where this test asked for 150. The
// windows need only the slow block and a request after it, so a run that
// sent fewer than slowTo+1 proves nothing and runs again on a fresh
// server, up to three times. So does a run whose fast answers of the first
// window already took the slow answers' time (p50 >= 250 ms): the process
// was starved (s15, .ci/run at idle priority on a loaded machine: p50 383
// ms in every window, the slow block's 415 ms barely above).
func TestOpenLoopWindowsShowWhenLatencyRose(t *testing.T) {
	const (
		slow             = 250 * time.Millisecond
		slowFrom, slowTo = 85, 115
	)
	var run VegetaRun
	var wins []LoopWindow
	for attempt := 1; ; attempt++ {
		var seen atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if i := seen.Add(1); i >= slowFrom && i <= slowTo {
				time.Sleep(slow)
			}
			_, _ = w.Write([]byte(`{}`))
		}))
		run, wins = OpenLoopWindows(context.Background(), srv.URL+"/v1/completions", 200, time.Second, 200*time.Millisecond, false, 0, 0)
		srv.Close()
		var why string
		switch {
		case run.Requests <= slowTo:
			why = fmt.Sprintf("the run sent %d requests of 200, want more than %d (the slow block and one after it)", run.Requests, slowTo)
		case len(wins) > 0 && wins[0].P50 >= float64(slow/time.Millisecond):
			why = fmt.Sprintf("the first window's fast answers took %.0f ms (p50), no less than the slow ones' %v", wins[0].P50, slow)
		}
		if why == "" {
			break
		}
		if attempt == 3 {
			t.Fatalf("attempt %d: %s; none of %d attempts proved anything (a starved process)", attempt, why, attempt)
		}
		t.Logf("attempt %d: %s (a starved process); again", attempt, why)
	}
	if len(wins) != 6 {
		t.Fatalf("%d windows, want 6 (1 s in 200 ms, and one for the end)", len(wins))
	}
	sent := 0
	for _, w := range wins {
		sent += w.Sent
	}
	if uint64(sent) != run.Requests {
		t.Fatalf("windows hold %d requests, the run %d", sent, run.Requests)
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
