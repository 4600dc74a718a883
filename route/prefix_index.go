package route

import (
	"math/bits"
	"sync/atomic"
)

// indexWays is how many backends one prefix-index entry remembers.
const indexWays = 4

// prefixIndex maps a prompt-prefix block hash to the backends this proxy
// recently dispatched that prefix to, so that finding the backend with the
// longest cached prefix costs the same whatever the fleet's size: a few
// index lookups, then a prefix-table Match on at most indexWays backends,
// instead of a Match on every backend.
//
// Only anchor blocks are indexed: the blocks at depths 1, 2, 4, 8, ... and
// the prompt's last hashed block, so a request writes at most 8 entries
// (64 blocks) and the index reaches that many times further back than one
// of every block would. Because block hashes are chained, a backend listed
// under the anchor at depth k was sent the whole k-block prefix.
//
// It is direct-mapped and lossy, like the per-backend tables: an anchor
// lives in entry hash&mask, a newer anchor mapping there evicts it, and an
// entry keeps the last indexWays distinct backends sent its anchor
// (oldest replaced first). Concurrent inserts into one entry may leave a
// backend listed under a hash it was not sent; the per-backend prefix
// table, which every lookup confirms with Match, stays the truth, so the
// index only ever costs a missed holder, never a wrong one. Lock-free and
// allocation-free; safe for concurrent use.
type prefixIndex struct {
	mask    uint64
	entries []indexEntry
}

// indexEntry is one anchor hash and up to indexWays backends sent it.
type indexEntry struct {
	hash    atomic.Uint64
	next    atomic.Uint32 // the way the next new holder replaces
	holders [indexWays]atomic.Pointer[Backend]
}

// newPrefixIndex returns an index of at least entries entries (rounded up
// to a power of two, at least 1).
func newPrefixIndex(entries int) *prefixIndex {
	n := 1
	for n < entries {
		n <<= 1
	}
	return &prefixIndex{mask: uint64(n - 1), entries: make([]indexEntry, n)}
}

// isAnchor reports whether the block at position i (0-based) of a prompt
// of n hashed blocks is indexed: depth i+1 a power of two, or the last.
func isAnchor(i, n int) bool {
	d := i + 1
	return d&(d-1) == 0 || i == n-1
}

// slot returns the entry of hash h. Block hashes are xxhash values, but
// the per-backend tables index by their low bits too: mixing the high ones
// in keeps the two tables' collisions independent.
func (x *prefixIndex) slot(h uint64) *indexEntry {
	return &x.entries[(h^h>>29)&x.mask]
}

// Insert records that blocks were dispatched to b.
func (x *prefixIndex) Insert(blocks []uint64, b *Backend) {
	for i, h := range blocks {
		if isAnchor(i, len(blocks)) {
			x.add(h, b)
		}
	}
}

// add lists b under hash h.
func (x *prefixIndex) add(h uint64, b *Backend) {
	e := x.slot(h)
	if e.hash.Load() != h {
		// A new hash takes the entry over.
		e.hash.Store(h)
		e.holders[0].Store(b)
		for w := 1; w < indexWays; w++ {
			e.holders[w].Store(nil)
		}
		e.next.Store(1)
		return
	}
	for w := range e.holders {
		if e.holders[w].Load() == b {
			return
		}
	}
	w := (e.next.Add(1) - 1) % indexWays
	e.holders[w].Store(b)
}

// Holders calls fn with each backend listed under the deepest anchor of
// blocks that lists any backend fn accepts, and returns that anchor's
// depth (0 when none does). fn returns whether it accepts the backend; it
// may be called with the same backend more than once and with a backend
// no longer in the pool (it must check). Cost: at most one entry per
// anchor (8 for 64 blocks) and indexWays calls of fn per entry visited.
func (x *prefixIndex) Holders(blocks []uint64, fn func(*Backend) bool) int {
	n := len(blocks)
	// Anchors from the deepest: the last block, then the powers of two
	// below it.
	for i := n - 1; i >= 0; {
		e := x.slot(blocks[i])
		if e.hash.Load() == blocks[i] {
			any := false
			for w := range e.holders {
				if b := e.holders[w].Load(); b != nil && fn(b) {
					any = true
				}
			}
			if any {
				return i + 1
			}
		}
		if i == 0 {
			break
		}
		// The next anchor below depth i+1: the largest power of two
		// strictly below it, i.e. at most i.
		i = 1<<(bits.Len(uint(i))-1) - 1
	}
	return 0
}
