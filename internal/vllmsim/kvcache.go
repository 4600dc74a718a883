package vllmsim

// kvCache is a paged KV cache with automatic prefix caching, as vLLM V1's
// BlockPool: blocks are reference counted; a block whose count drops to zero goes to
// a free queue but keeps its content hash, so a later request with the same prefix
// can take it back (a cache hit); allocation pops the head of the free queue and
// evicts whatever hash the popped block held (LRU).
//
// Deviation from vLLM, on purpose: freed blocks that hold no cached content (partial
// blocks, generated tokens) go to the head of the free queue, so they are reused
// before any cached block; vLLM appends them to the tail. Cached blocks of one
// request are appended in reverse order, so its prefix is evicted last (as vLLM).
//
// A kvCache is not safe for concurrent use; the Engine owns it.
type kvCache struct {
	blockSize int
	refs      []int32
	hash      []uint64 // 0: no cached content
	prev      []int32  // free-queue links, -1 = none
	next      []int32
	inFree    []bool
	head      int32
	tail      int32
	numFree   int
	cached    map[uint64]int32
}

func newKVCache(numBlocks, blockSize int) *kvCache {
	c := &kvCache{
		blockSize: blockSize,
		refs:      make([]int32, numBlocks),
		hash:      make([]uint64, numBlocks),
		prev:      make([]int32, numBlocks),
		next:      make([]int32, numBlocks),
		inFree:    make([]bool, numBlocks),
		head:      -1,
		tail:      -1,
		cached:    make(map[uint64]int32),
	}
	for b := range numBlocks {
		c.pushTail(int32(b))
	}
	return c
}

// usage is vLLM's kv_cache_usage: the share of blocks not in the free queue.
func (c *kvCache) usage() float64 {
	return 1 - float64(c.numFree)/float64(len(c.refs))
}

func (c *kvCache) pushTail(b int32) {
	c.prev[b], c.next[b] = c.tail, -1
	if c.tail >= 0 {
		c.next[c.tail] = b
	} else {
		c.head = b
	}
	c.tail = b
	c.inFree[b] = true
	c.numFree++
}

func (c *kvCache) pushHead(b int32) {
	c.prev[b], c.next[b] = -1, c.head
	if c.head >= 0 {
		c.prev[c.head] = b
	} else {
		c.tail = b
	}
	c.head = b
	c.inFree[b] = true
	c.numFree++
}

func (c *kvCache) remove(b int32) {
	p, n := c.prev[b], c.next[b]
	if p >= 0 {
		c.next[p] = n
	} else {
		c.head = n
	}
	if n >= 0 {
		c.prev[n] = p
	} else {
		c.tail = p
	}
	c.inFree[b] = false
	c.numFree--
}

// probe returns how many leading blocks of hashes (at most max) are cached, and how
// many of those currently sit in the free queue. It changes nothing.
func (c *kvCache) probe(hashes []uint64, max int) (hits, hitsFree int) {
	if max > len(hashes) {
		max = len(hashes)
	}
	for hits < max {
		b, ok := c.cached[hashes[hits]]
		if !ok {
			break
		}
		if c.inFree[b] {
			hitsFree++
		}
		hits++
	}
	return hits, hitsFree
}

// touch takes a reference on the first n cached blocks of hashes (found by probe)
// and appends them to out.
func (c *kvCache) touch(hashes []uint64, n int, out []int32) []int32 {
	for i := range n {
		b := c.cached[hashes[i]]
		if c.inFree[b] {
			c.remove(b)
		}
		c.refs[b]++
		out = append(out, b)
	}
	return out
}

// alloc pops n blocks from the free queue, evicting their cached content, and
// appends them to out. The caller checks numFree first.
func (c *kvCache) alloc(n int, out []int32) []int32 {
	for range n {
		b := c.head
		c.remove(b)
		if h := c.hash[b]; h != 0 {
			if c.cached[h] == b {
				delete(c.cached, h)
			}
			c.hash[b] = 0
		}
		c.refs[b] = 1
		out = append(out, b)
	}
	return out
}

// commit records that block b now holds the full block with hash h, making it a
// prefix-cache entry. If another block already caches h, b stays uncached (as vLLM
// keeps the first copy).
func (c *kvCache) commit(b int32, h uint64) {
	if _, ok := c.cached[h]; ok || c.hash[b] != 0 {
		return
	}
	c.hash[b] = h
	c.cached[h] = b
}

// free drops one reference on each block, last block first; blocks reaching zero
// return to the free queue.
func (c *kvCache) free(blocks []int32) {
	for i := len(blocks) - 1; i >= 0; i-- {
		b := blocks[i]
		c.refs[b]--
		if c.refs[b] > 0 {
			continue
		}
		if c.hash[b] != 0 {
			c.pushTail(b)
		} else {
			c.pushHead(b)
		}
	}
}
