package route

import (
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/testutil"
)

// closeConn is a net.Conn that only records whether it was closed, and
// lets a goroutine wait for that as a stream waits on its socket.
type closeConn struct {
	net.Conn
	once   sync.Once
	closed chan struct{}
}

func newCloseConn() *closeConn { return &closeConn{closed: make(chan struct{})} }

func (c *closeConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

// newEntry returns the registration of a fresh stream on raw, as
// startHijack fills it in.
func newEntry(raw net.Conn) *hijackEntry {
	s := &bodyStream{}
	s.hj.reg.s, s.hj.reg.raw = s, raw
	return &s.hj.reg
}

func (c *closeConn) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// TestHijackRegistryShutdownMissesNoStream races streams through the
// registry's whole life (register, start, stream, park, drop) against
// Shutdown's beginStop and cut, as hijack.go and Shutdown use them. A
// stream blocks, as on a real socket, until its connection is closed; one
// the registry let register but Shutdown never found would block past the
// deadline. It checks: every registered stream's connection is closed by
// Shutdown or by the stream itself; a stream whose idle connection
// Shutdown closed is told not to keep it; a stream is settled by exactly
// one of its hijack handler or cut.
func TestHijackRegistryShutdownMissesNoStream(t *testing.T) {
	const workers = 8
	for round := range 200 {
		var (
			r                   hijackRegistry
			wg                  sync.WaitGroup
			registered, refused atomic.Int64
			started, claimed    atomic.Int64
			mu                  sync.Mutex
			streams             = map[*bodyStream]bool{} // registered -> settled by its handler
			graceOver           = make(chan struct{})    // closed between beginStop and cut
			handedBack          []*closeConn             // given back to the server by drop
		)
		for w := range workers {
			wg.Go(func() {
				rnd := rand.New(rand.NewPCG(uint64(round), uint64(w)))
				for {
					raw := newCloseConn()
					e := newEntry(raw)
					s := e.s
					mu.Lock()
					streams[s] = false // before cut can see it
					mu.Unlock()
					if !r.register(e) {
						refused.Add(1)
						return // fasthttp writes it; Shutdown is under way
					}
					registered.Add(1)
					for range rnd.IntN(3) {
						runtime.Gosched()
					}
					if !e.start() {
						continue // cut claimed and settled it
					}
					started.Add(1)
					mu.Lock()
					streams[s] = true
					mu.Unlock()
					keep := true
					switch rnd.IntN(3) {
					case 0: // streams until its connection is cut
						waitClosed(t, raw, "a streaming connection")
						keep = false
					case 1: // ends at once and parks
						if keep = r.park(e); keep {
							select {
							case <-raw.closed:
							case <-graceOver:
								// beginStop closes idle connections before
								// it returns, and it returned.
								if !raw.isClosed() {
									t.Error("beginStop left a connection parked before it open")
								}
								waitClosed(t, raw, "a parked connection")
							}
						}
					default: // ends, parks, the client's next request comes
						keep = r.park(e)
					}
					closedWhileParked := keep && raw.isClosed()
					if !r.drop(e) {
						keep = false
					}
					if closedWhileParked && keep {
						t.Error("drop let a stream keep a connection Shutdown closed")
					}
					if !keep {
						_ = raw.Close()
					} else {
						mu.Lock()
						handedBack = append(handedBack, raw)
						mu.Unlock()
					}
				}
			})
		}
		time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
		r.beginStop()
		close(graceOver)
		runtime.Gosched()
		for _, s := range r.cut() {
			claimed.Add(1)
			mu.Lock()
			if settled, ok := streams[s]; !ok || settled {
				t.Errorf("cut claimed a stream that was not pending (known %v, started %v)", ok, settled)
			}
			mu.Unlock()
		}
		wg.Wait()
		if refused.Load() != workers {
			t.Fatalf("%d workers saw Shutdown, want %d", refused.Load(), workers)
		}
		if got := started.Load() + claimed.Load(); got != registered.Load() {
			t.Fatalf("round %d: %d registered, %d started + %d claimed by cut", round, registered.Load(), started.Load(), claimed.Load())
		}
		for _, raw := range handedBack {
			if raw.isClosed() {
				t.Fatalf("round %d: Shutdown closed a connection drop had given back to the server", round)
			}
		}
		if n := countEntries(&r); n != 0 {
			t.Fatalf("round %d: %d entries left registered", round, n)
		}
		if t.Failed() {
			return
		}
	}
}

// waitClosed blocks until c is closed, failing the test if that takes
// longer than any Shutdown may.
func waitClosed(t *testing.T, c *closeConn, what string) {
	select {
	case <-c.closed:
	case <-time.After(5 * time.Second):
		t.Errorf("%s registered before Shutdown was never closed", what)
	}
}

func countEntries(r *hijackRegistry) int {
	n := 0
	r.each(func(*hijackEntry) { n++ })
	return n
}

// TestHijackRegistryRefusesAfterStop: once Shutdown began, nothing
// registers or parks, and drop says not to keep the connection.
func TestHijackRegistryRefusesAfterStop(t *testing.T) {
	var r hijackRegistry
	raw := newCloseConn()
	e := newEntry(raw)
	if !r.register(e) || !e.start() {
		t.Fatal("register or start refused before Shutdown")
	}
	r.beginStop()
	if raw.isClosed() {
		t.Fatal("beginStop closed a streaming connection")
	}
	late := newEntry(newCloseConn())
	if r.register(late) || late.pinned {
		t.Fatal("registered after beginStop")
	}
	if r.park(e) {
		t.Fatal("parked after beginStop")
	}
	if r.drop(e) {
		t.Fatal("drop after beginStop allowed keeping the connection")
	}
	if !e.pinned {
		t.Fatal("an entry dropped during Shutdown may be recycled")
	}
	if len(r.cut()) != 0 || countEntries(&r) != 0 {
		t.Fatal("entries left after drop")
	}
}

// TestHijackRegistrySlots: goroutines holding many streams at once get
// distinct slots (the table grows past one chunk), every held stream is
// visible to a Range, and once they dropped, the same number of streams
// reuses the slots without growing the table.
func TestHijackRegistrySlots(t *testing.T) {
	const workers, each = 8, 100 // 800 held at once: several chunks
	var r hijackRegistry
	cycle := func() {
		held := make([][]*hijackEntry, workers)
		testutil.Together(workers, func(w int) {
			for range each {
				e := newEntry(newCloseConn())
				if !r.register(e) {
					t.Error("register refused before Shutdown")
					return
				}
				held[w] = append(held[w], e)
			}
		})
		seen := map[*hijackEntry]bool{}
		slots := map[[2]uint32]bool{}
		r.each(func(e *hijackEntry) { seen[e] = true })
		for _, es := range held {
			for _, e := range es {
				if !seen[e] {
					t.Fatalf("a registered stream (slot %d/%d) is not visible", e.shard, e.idx)
				}
				at := [2]uint32{e.shard, e.idx}
				if slots[at] {
					t.Fatalf("slot %v given to two streams", at)
				}
				slots[at] = true
			}
		}
		testutil.Together(workers, func(w int) {
			for _, e := range held[w] {
				if !r.drop(e) || e.pinned {
					t.Error("drop before Shutdown refused or pinned")
				}
			}
		})
		if n := countEntries(&r); n != 0 {
			t.Fatalf("%d entries visible after every stream dropped", n)
		}
	}
	cycle()
	grown := tableChunks(&r)
	if grown*chunkSlots < workers*each {
		t.Fatalf("%d chunks for %d streams", grown, workers*each)
	}
	// A stream's shard is random: allow the second cycle's streams to
	// spread differently, but not to grow the tables by a chunk per stream.
	cycle()
	if n := tableChunks(&r); n > grown+regShards {
		t.Fatalf("the tables grew from %d to %d chunks for as many streams as before", grown, n)
	}
	for range 5 {
		cycle()
	}
	if n := tableChunks(&r); n > grown+regShards {
		t.Fatalf("the tables grew from %d to %d chunks over 7 cycles of as many streams", grown, n)
	}
}

// tableChunks counts the chunks of r's slot tables.
func tableChunks(r *hijackRegistry) int {
	n := 0
	for i := range r.shards {
		if cs := r.shards[i].chunks.Load(); cs != nil {
			n += len(*cs)
		}
	}
	return n
}

// BenchmarkHijackRegistry is one hijacked stream's registry work:
// register, start, park, drop.
func BenchmarkHijackRegistry(b *testing.B) {
	var r hijackRegistry
	raw := newCloseConn()
	b.Run("serial", func(b *testing.B) {
		e := newEntry(raw)
		b.ReportAllocs()
		for b.Loop() {
			r.register(e)
			e.start()
			r.park(e)
			r.drop(e)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			e := newEntry(raw)
			for pb.Next() {
				r.register(e)
				e.start()
				r.park(e)
				r.drop(e)
			}
		})
	})
}
