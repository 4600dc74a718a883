package logsink

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sink is a thread-safe out that counts its Write calls and can be held
// (every Write waits until release).
type sink struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
	hold   chan struct{} // nil: never waits
	delay  time.Duration
}

func (s *sink) Write(p []byte) (int, error) {
	if s.hold != nil {
		<-s.hold
	}
	if s.delay > 0 {
		time.Sleep(s.delay)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes++
	return s.buf.Write(p)
}

func (s *sink) snapshot() (string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String(), s.writes
}

// Every line written concurrently arrives whole, once, and in each
// writer's order; Close returns only after the last one is out.
func TestLinesArriveWholeAndInOrder(t *testing.T) {
	out := &sink{}
	w := New(out, nil)
	const writers, lines = 8, 500
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range lines {
				fmt.Fprintf(w, "{\"g\":%d,\"i\":%d,\"pad\":%q}\n", g, i, strings.Repeat("x", i%300))
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, _ := out.snapshot()
	next := make([]int, writers)
	n := 0
	for _, l := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
		var g, i int
		var pad string
		if _, err := fmt.Sscanf(l, "{\"g\":%d,\"i\":%d,\"pad\":%q}", &g, &i, &pad); err != nil {
			t.Fatalf("line %q is not a whole line: %v", l, err)
		}
		if i != next[g] || len(pad) != i%300 {
			t.Fatalf("writer %d: line %d arrived when %d was due (pad %d)", g, i, next[g], len(pad))
		}
		next[g]++
		n++
	}
	if n != writers*lines || w.Dropped() != 0 {
		t.Fatalf("%d lines out, %d dropped; want %d and 0", n, w.Dropped(), writers*lines)
	}
}

// A destination that stops taking writes never stalls a writer: lines
// beyond Capacity are dropped and counted, onDrop is told once for the
// episode, and what was accepted is written once the destination resumes.
func TestStalledDestinationNeverBlocksWrites(t *testing.T) {
	out := &sink{hold: make(chan struct{})}
	var drops atomic.Int32
	var total atomic.Uint64
	w := New(out, func(d uint64) { drops.Add(1); total.Store(d) })
	const n = 3 * Capacity
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			fmt.Fprintf(w, "line %d\n", i)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		close(out.hold)
		t.Fatal("Write blocked behind a stalled destination")
	}
	// One batch (at most batchBytes, lines of at least 7 bytes) is held
	// inside out.Write, Capacity lines wait in the queue, the rest dropped.
	if d := w.Dropped(); d < n-Capacity-batchBytes/7 || d > n-Capacity {
		t.Fatalf("dropped %d of %d lines; want %d..%d", d, n, n-Capacity-batchBytes/7, n-Capacity)
	}
	close(out.hold)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, _ := out.snapshot()
	written := uint64(strings.Count(got, "\n"))
	if written+w.Dropped() != n {
		t.Fatalf("%d written + %d dropped != %d written by callers", written, w.Dropped(), n)
	}
	if drops.Load() != 1 || total.Load() != w.Dropped() {
		t.Fatalf("onDrop called %d times with total %d; want once with %d", drops.Load(), total.Load(), w.Dropped())
	}
}

// Under load, lines share writes: a destination that takes 1 ms per write
// sees far fewer writes than lines.
func TestSlowDestinationGetsBatches(t *testing.T) {
	out := &sink{delay: time.Millisecond}
	w := New(out, nil)
	const n = 2000
	defer w.Close()
	for i := range n {
		fmt.Fprintf(w, "{\"i\":%d}\n", i)
	}
	// Wait for the writer goroutine itself to write them all (Close would
	// drain the rest in batches of its own).
	deadline := time.Now().Add(10 * time.Second)
	got, writes := out.snapshot()
	for strings.Count(got, "\n") < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d lines out after 10 s", strings.Count(got, "\n"), n)
		}
		time.Sleep(time.Millisecond)
		got, writes = out.snapshot()
	}
	if writes > n/10 {
		t.Fatalf("%d writes for %d lines; want batches (at most %d writes)", writes, n, n/10)
	}
}

// After Close, lines go straight to the destination (the last lines of a
// shutting-down process are not lost).
func TestWritesAfterCloseAreSynchronous(t *testing.T) {
	out := &sink{}
	w := New(out, nil)
	fmt.Fprintln(w, "before")
	_ = w.Close()
	fmt.Fprintln(w, "after")
	if got, _ := out.snapshot(); got != "before\nafter\n" {
		t.Fatalf("got %q", got)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// A Write recycles its buffers: no allocation per line once warm.
func TestWriteDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop buffers at random")
	}
	w := New(&sink{}, nil)
	defer w.Close()
	line := []byte(`{"level":"info","request_id":"662a7e32b28e6d01","status":200,"bytes":1177,"first_byte_ms":9.19,"total_ms":37.8,"backend":"127.0.0.1:42303","source":"probe","attempts":1,"message":"request"}` + "\n")
	for range 1000 {
		_, _ = w.Write(line)
	}
	time.Sleep(10 * time.Millisecond)
	if a := testing.AllocsPerRun(1000, func() {
		_, _ = w.Write(line)
		// Let the writer goroutine keep up, so buffers come back to the pool.
		for len(w.lines) > 0 {
			time.Sleep(time.Microsecond)
		}
	}); a > 0.05 {
		t.Fatalf("%.2f allocs per Write, want 0", a)
	}
}

func BenchmarkWrite(b *testing.B) {
	w := New(&sink{}, nil)
	defer w.Close()
	line := []byte(`{"level":"info","request_id":"662a7e32b28e6d01","status":200,"bytes":1177,"first_byte_ms":9.19,"total_ms":37.8,"backend":"127.0.0.1:42303","source":"probe","attempts":1,"message":"request"}` + "\n")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, _ = w.Write(line)
		}
	})
}

// A destination that never takes the last lines cannot hold the process:
// Close gives up after its wait and says so.
func TestCloseGivesUpOnAStalledDestination(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		out := &sink{hold: make(chan struct{})}
		w := New(out, nil)
		w.closeWait = 2 * time.Second
		fmt.Fprintln(w, "never written")
		start := time.Now()
		if err := w.Close(); !errors.Is(err, ErrStalled) {
			t.Fatalf("Close = %v, want ErrStalled", err)
		}
		if waited := time.Since(start); waited != 2*time.Second {
			t.Fatalf("Close waited %v, want 2s", waited)
		}
		close(out.hold) // let the goroutine finish inside the bubble
		synctest.Wait()
	})
}
