package route

import "math/rand/v2"

// connSet is the set of open client connections, which Shutdown closes
// when its grace ends (cutting the streams fasthttp still writes). It is
// updated per connection (fasthttp's ConnState: new, closed, hijacked; and
// when a connection goes back to the server after a hijacked stream)
// without a lock: each connection holds a slot of one of regShards
// lock-free slot tables, picked at random, and remembers it.
//
// closeAll closes the connections it finds in the slots. One added while
// it scans may be missed, as with any set: Shutdown calls it once fasthttp
// stopped accepting and hijacked streams stopped handing connections back
// (hijackRegistry.drop reports false once Shutdown began), so none is
// added then. A clientConn is never reused, so a scan that reaches one
// already removed only closes a closed connection again.
type connSet struct {
	shards [regShards]slotTable[clientConn]
}

// add records c. Call it once per clientConn, before remove.
func (s *connSet) add(c *clientConn) {
	c.shard = rand.Uint32N(regShards)
	t := &s.shards[c.shard]
	c.idx = t.take()
	t.slot(c.idx).Store(c)
	c.tracked.Store(true)
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

// closeAll closes every connection in the set.
func (s *connSet) closeAll() {
	for i := range s.shards {
		s.shards[i].each(func(c *clientConn) { _ = c.Close() })
	}
}
