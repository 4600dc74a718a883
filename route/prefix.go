package route

import "sync/atomic"

// prefixTable is a bounded, lock-free, approximate LRU of the prompt-prefix
// block hashes this proxy dispatched to one backend. It is direct-mapped: a
// hash lives in slot hash&mask, and a newer hash that maps to the same slot
// evicts the older one, so recently dispatched blocks win (an LRU
// approximation with O(1), allocation-free inserts and lookups). Safe for
// concurrent use.
type prefixTable struct {
	mask  uint64
	slots []atomic.Uint64
}

// newPrefixTable returns a table of at least entries slots (rounded up to a
// power of two).
func newPrefixTable(entries int) *prefixTable {
	n := 1
	for n < entries {
		n <<= 1
	}
	return &prefixTable{mask: uint64(n - 1), slots: make([]atomic.Uint64, n)}
}

// Insert records blocks as cached on the backend.
func (t *prefixTable) Insert(blocks []uint64) {
	for _, h := range blocks {
		s := &t.slots[h&t.mask]
		if s.Load() != h {
			s.Store(h)
		}
	}
}

// Match returns how many leading blocks of blocks are recorded. Because the
// hashes are chained, block i matching implies its whole prefix was sent.
func (t *prefixTable) Match(blocks []uint64) int {
	for i, h := range blocks {
		if t.slots[h&t.mask].Load() != h {
			return i
		}
	}
	return len(blocks)
}
