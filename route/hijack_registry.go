package route

import (
	"math/rand/v2"
	"net"
	"sync/atomic"
)

// hijackRegistry lets Shutdown find the SSE streams pumped over hijacked
// client connections (hijack.go), which fasthttp no longer tracks, without
// a lock or an allocation on a stream's path. A stream's registration is
// an entry embedded in its pooled bodyStream, published in a slot of one of
// regShards lock-free slot tables (slot_table.go), picked at random so that
// streams starting at once on different cores rarely touch the same free
// list.
//
// # Why Shutdown misses no stream
//
// Go's atomic operations behave as if executed in one sequentially
// consistent order. Each guarantee below pairs a write-then-read on the
// stream's side with a write-then-read on Shutdown's (the store buffering
// pattern): of two goroutines that each write their own variable and then
// read the other's, at least one sees the other's write.
//
//   - register: store e in its slot, then load stopping. beginStop: store
//     stopping, then (in beginStop and later in cut) load every slot. If
//     register loaded false, its store precedes those loads, which see e
//     (the slot is not written again until the stream drops): a stream
//     register admits is always found. If it loaded true, register
//     withdraws e (unless cut already claimed it, see the phases) and the
//     stream is written by fasthttp, which Shutdown tracks itself.
//   - park: store phase parked, then load stopping. beginStop: store
//     stopping, then load each entry's phase. Either park sees stopping
//     (and the stream closes its connection itself) or beginStop sees
//     parked (and closes it): a connection idle after a stream never
//     outlives beginStop.
//   - drop: store phase done, clear the slot, then load stopping. If
//     beginStop closed the connection of e, it read parked before drop's
//     store, so drop's load sees stopping and the stream closes that
//     connection too rather than hand it back to the server: beginStop
//     never closes a connection the server has taken back.
//
// A scan of the slots (beginStop, cut) only ever runs after stopping was
// set. An entry whose drop loaded false had its slot cleared before
// stopping was set, so no scan can reach it, and its bodyStream goes back
// to the pool. An entry whose register or drop saw stopping may still be
// held by a scan, so it is pinned: its bodyStream is never recycled (the
// garbage collector takes it), and a scan never touches a stream that
// serves another request.
//
// The one lock left is a slot table's growMu, taken by register only when
// every slot of its table is in use (see slotTable).
type hijackRegistry struct {
	stopping atomic.Bool
	_        [60]byte // read by every stream: not on a free list's cache line
	shards   [regShards]slotTable[hijackEntry]
}

// regShards is the number of slot tables of a hijackRegistry.
const regShards = 16

// hijackEntry is one hijacked stream's registration, embedded in its
// bodyStream and reset with it.
type hijackEntry struct {
	s      *bodyStream // touched by Shutdown only after it claimed a pending entry
	raw    net.Conn    // the client's socket
	phase  atomic.Int32
	shard  uint32 // its slot while registered: shards[shard], index idx
	idx    uint32
	pinned bool // a scan may hold it: its bodyStream must not be recycled
}

// Phases of a hijacked stream. Only the CAS from hijackPending decides who
// settles a stream whose hijack handler has not run yet: the handler
// (start), register's withdrawal, or Shutdown's cut.
const (
	hijackPending   int32 = iota // handed to fasthttp; its hijack handler has not run
	hijackStreaming              // the pump owns the stream
	hijackParked                 // settled; waiting for the client's next request
	hijackCut                    // Shutdown's cut settled it before it started
	hijackDone                   // dropped or withdrawn: nothing left to find
)

// register records e (its s and raw set) as a stream about to be
// hijacked. It reports false, and records nothing, when the proxy is
// shutting down, unless cut claimed the entry in between: then the caller
// hijacks as if registered, and the hijack handler finds the stream
// settled (start reports false).
func (r *hijackRegistry) register(e *hijackEntry) bool {
	if r.stopping.Load() {
		return false
	}
	e.phase.Store(hijackPending)
	e.shard = rand.Uint32N(regShards)
	e.idx = r.shards[e.shard].take()
	r.slot(e).Store(e)
	if r.stopping.Load() && e.phase.CompareAndSwap(hijackPending, hijackDone) {
		r.slot(e).Store(nil)
		e.pinned = true
		return false
	}
	return true
}

// start moves e from pending to streaming; false means Shutdown's cut
// claimed the stream first and settled it.
func (e *hijackEntry) start() bool {
	return e.phase.CompareAndSwap(hijackPending, hijackStreaming)
}

// park marks a settled stream's connection idle. It reports false when the
// proxy is shutting down: the caller must close the connection.
func (r *hijackRegistry) park(e *hijackEntry) bool {
	e.phase.Store(hijackParked)
	return !r.stopping.Load()
}

// drop forgets e and reports whether its connection may serve more
// requests (the proxy is not shutting down). After a false return the
// entry is pinned.
func (r *hijackRegistry) drop(e *hijackEntry) bool {
	e.phase.Store(hijackDone)
	r.slot(e).Store(nil)
	if r.stopping.Load() {
		e.pinned = true // the slot is not reused either: Shutdown is under way
		return false
	}
	r.shards[e.shard].give(e.idx)
	return true
}

// beginStop marks the proxy as shutting down, so that no stream registers
// or parks any more, and closes the connections that wait for a next
// request after a stream.
func (r *hijackRegistry) beginStop() {
	r.stopping.Store(true)
	r.each(func(e *hijackEntry) {
		if e.phase.Load() == hijackParked {
			_ = e.raw.Close()
		}
	})
}

// cut closes every registered connection (Shutdown's grace is over) and
// returns the streams whose hijack handler had not run yet, which the
// caller now owns and must settle. Call it after beginStop.
func (r *hijackRegistry) cut() []*bodyStream {
	var claimed []*bodyStream
	r.each(func(e *hijackEntry) {
		_ = e.raw.Close()
		if e.phase.CompareAndSwap(hijackPending, hijackCut) {
			r.slot(e).CompareAndSwap(e, nil)
			claimed = append(claimed, e.s)
		}
	})
	return claimed
}

// slot returns the slot e is registered in.
func (r *hijackRegistry) slot(e *hijackEntry) *atomic.Pointer[hijackEntry] {
	return r.shards[e.shard].slot(e.idx)
}

// each calls f with every registered entry.
func (r *hijackRegistry) each(f func(*hijackEntry)) {
	for i := range r.shards {
		r.shards[i].each(f)
	}
}
