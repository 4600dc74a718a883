package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestOpenLoopMaxWorkersFixesTheConnections: against an upstream that
// holds each request 40 ms, 300 req/s needs about 12 in flight. With
// maxWorkers 4 the generator never has more than 4 requests in flight nor
// opens more than 4 connections (it sends late instead), which is what
// `openloop -max-workers` is for: a load whose connection count does not
// grow when the target falls behind. The unbounded run, in the same test,
// shows the bound is what held it.
func TestOpenLoopMaxWorkersFixesTheConnections(t *testing.T) {
	run := func(maxWorkers int) (peak int64, conns int, sent uint64) {
		var cur, top atomic.Int64
		var mu sync.Mutex
		peers := map[string]bool{}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			peers[r.RemoteAddr] = true
			mu.Unlock()
			n := cur.Add(1)
			for {
				m := top.Load()
				if n <= m || top.CompareAndSwap(m, n) {
					break
				}
			}
			time.Sleep(40 * time.Millisecond)
			cur.Add(-1)
			_, _ = w.Write([]byte(`{}`))
		}))
		defer srv.Close()
		r, _ := OpenLoopWindows(context.Background(), srv.URL+"/v1/completions", 300, 600*time.Millisecond, 200*time.Millisecond, false, maxWorkers)
		mu.Lock()
		defer mu.Unlock()
		return top.Load(), len(peers), r.Requests
	}
	peak, conns, sent := run(4)
	if sent < 20 {
		t.Fatalf("bounded run sent %d requests, want at least 20", sent)
	}
	if peak > 4 || conns > 4 {
		t.Errorf("maxWorkers 4: %d requests in flight at once on %d connections, want at most 4 of each", peak, conns)
	}
	if peak, conns, _ := run(0); peak <= 4 || conns <= 4 {
		t.Errorf("unbounded: %d requests in flight at once on %d connections, want more than 4 (300 req/s x 40 ms)", peak, conns)
	}
}
