package route

import (
	"slices"
	"sync"
	"sync/atomic"
)

// slotTable is a lock-free set of slots holding *T, for the registries
// Shutdown scans (hijackRegistry, connSet): take hands out a free slot
// index, the caller stores its entry in it and clears it, give takes the
// index back, each visits the occupied slots. Free slots form a Treiber stack whose head carries a tag,
// bumped by every change, so that a pop racing with a pop and a push of
// the same index (ABA) fails its compare-and-swap. The table grows, under
// growMu, only when every slot is in use: a few times in a process's life
// (chunkSlots slots each time), never again once it fits the largest
// number of concurrent entries. Its zero value is an empty table.
type slotTable[T any] struct {
	// free is the free list's head: the tag in the high 32 bits, the first
	// free slot's index plus one in the low 32 (0: empty).
	free   atomic.Uint64
	chunks atomic.Pointer[[]*slotChunk[T]] // copy-on-grow; nil until the first take
	growMu sync.Mutex                      // serializes growth only
	_      [40]byte                        // keep shards' free lists on separate cache lines
}

// chunkSlots is how many slots a table grows by at a time.
const chunkSlots = 64

type slotChunk[T any] struct {
	slot [chunkSlots]atomic.Pointer[T]
	next [chunkSlots]atomic.Uint32 // free list: the next free index plus one
}

// each calls f with the entry of every occupied slot.
func (t *slotTable[T]) each(f func(*T)) {
	cs := t.chunks.Load()
	if cs == nil {
		return
	}
	for _, c := range *cs {
		for i := range c.slot {
			if e := c.slot[i].Load(); e != nil {
				f(e)
			}
		}
	}
}

func (t *slotTable[T]) chunk(i uint32) *slotChunk[T] { return (*t.chunks.Load())[i/chunkSlots] }

func (t *slotTable[T]) slot(i uint32) *atomic.Pointer[T] {
	return &t.chunk(i).slot[i%chunkSlots]
}

func (t *slotTable[T]) link(i uint32) *atomic.Uint32 { return &t.chunk(i).next[i%chunkSlots] }

// take pops a free slot, growing the table if none is free.
func (t *slotTable[T]) take() uint32 {
	for {
		h := t.free.Load()
		first := uint32(h)
		if first == 0 {
			t.grow()
			continue
		}
		next := t.link(first - 1).Load()
		if t.free.CompareAndSwap(h, (h>>32+1)<<32|uint64(next)) {
			return first - 1
		}
	}
}

// give pushes slot i back on the free list.
func (t *slotTable[T]) give(i uint32) {
	for {
		h := t.free.Load()
		t.link(i).Store(uint32(h))
		if t.free.CompareAndSwap(h, (h>>32+1)<<32|uint64(i+1)) {
			return
		}
	}
}

// grow adds a chunk of free slots, unless another goroutine freed or added
// some meanwhile. The chunk is published before its slots are on the free
// list, so whoever takes a slot finds its chunk.
func (t *slotTable[T]) grow() {
	t.growMu.Lock()
	defer t.growMu.Unlock()
	if uint32(t.free.Load()) != 0 {
		return
	}
	var cs []*slotChunk[T]
	if old := t.chunks.Load(); old != nil {
		cs = slices.Clip(*old)
	}
	c := new(slotChunk[T])
	base := uint32(len(cs)) * chunkSlots
	cs = append(cs, c)
	t.chunks.Store(&cs)
	for i := range uint32(chunkSlots - 1) {
		c.next[i].Store(base + i + 2)
	}
	for {
		h := t.free.Load()
		c.next[chunkSlots-1].Store(uint32(h))
		if t.free.CompareAndSwap(h, (h>>32+1)<<32|uint64(base+1)) {
			return
		}
	}
}
