package route

import (
	"math/rand/v2"
	"sync/atomic"
)

// connSet is the set of open client connections, which Shutdown closes
// when its grace ends (cutting the streams fasthttp still writes). It is
// updated per connection (fasthttp's ConnState: new, closed, hijacked; and
// when a connection goes back to the server after a hijacked stream)
// without a lock: each connection holds a slot of one of regShards
// lock-free slot tables, picked at random, and remembers it.
//
// closeAll closes the connections it finds in the slots, and every one
// added after it: Shutdown calls it once its grace is over, when fasthttp
// has stopped accepting and hijacked streams no longer hand connections
// back (hijackRegistry.drop reports false once Shutdown began), but a
// connection fasthttp accepted before its listener closed is added by
// fasthttp's accept loop (ConnState new) whenever that goroutine runs
// again, which on a starved process can be after the scan; fasthttp then
// serves it, and once its own Shutdown gave up at the grace it serves it
// as if nothing were stopping. The pairing is register's (see
// hijackRegistry): add stores c in its slot, then loads closed; closeAll
// stores closed, then loads every slot. So either the scan finds c or add
// sees closed and closes c itself (both may: a second Close is harmless).
// A clientConn is never reused, so a scan that reaches one already removed
// only closes a closed connection again.
type connSet struct {
	closed atomic.Bool // closeAll ran: a connection added now is closed at once
	_      [60]byte    // read by every new connection: not on a free list's cache line
	shards [regShards]slotTable[clientConn]
}

// add records c. Call it once per clientConn, before remove.
func (s *connSet) add(c *clientConn) {
	c.shard = rand.Uint32N(regShards)
	t := &s.shards[c.shard]
	c.idx = t.take()
	t.slot(c.idx).Store(c)
	c.tracked.Store(true)
	if s.closed.Load() {
		_ = c.Close() // Shutdown's cut already ran (closeAll)
	}
}

// remove forgets c. It may be called more than once, and for a connection
// never added.
func (s *connSet) remove(c *clientConn) {
	if !c.tracked.CompareAndSwap(true, false) {
		return
	}
	t := &s.shards[c.shard]
	t.slot(c.idx).Store(nil)
	t.give(c.idx)
}

// closeAll closes every connection in the set, and makes add close every
// connection added from now on.
func (s *connSet) closeAll() {
	s.closed.Store(true)
	for i := range s.shards {
		s.shards[i].each(func(c *clientConn) { _ = c.Close() })
	}
}
