package route

import (
	"sync/atomic"
	"time"

	"github.com/probegate/probegate/internal/config"
)

// Memory is the routing state that outlives pickers: a Picker is rebuilt on
// every pool or configuration change, Memory is kept for the router's life
// (one per Proxy, or per simulated proxy). Its zero value is ready to use;
// it is safe for concurrent use and lock-free.
//
// Per-backend memories (prefix table, LoRA dispatches, load state) live on
// the Backend instead, so they follow a backend across pools.
type Memory struct {
	// rr is the round-robin cursor.
	rr atomic.Uint64
	// adapters are the model names some backend reported as LoRA adapters.
	adapters adapterSet
	// book is the token-aware load's proxy-wide state: the running mean
	// prompt and the per-model output estimate (load_account.go).
	book loadBook
	// index finds the backends holding a prompt prefix without visiting
	// every backend (prefix_index.go); nil until SizePrefixIndex or the
	// first dispatch of a request with prefix blocks.
	index atomic.Pointer[prefixIndex]
}

// SizePrefixIndex gives the prefix index entries entries
// (route.prefix.index_entries) if it has none yet; call it before the
// first dispatch. A zero Memory otherwise gets config.Default's size.
func (m *Memory) SizePrefixIndex(entries int) {
	if m.index.Load() == nil {
		m.index.CompareAndSwap(nil, newPrefixIndex(entries))
	}
}

// prefixIndex returns the index, nil when nothing was ever indexed.
func (m *Memory) prefixIndex() *prefixIndex { return m.index.Load() }

// NoteDispatch records that info's request is being sent to b at now: its
// prefix blocks are then believed cached there (b's prefix table and the
// proxy-wide index) and its model loaded there (prefix and LoRA affinity).
// The proxy calls it once per attempt; a simulator once per simulated
// dispatch. Lock-free; allocation-free after the index exists.
func (m *Memory) NoteDispatch(b *Backend, info *RequestInfo, now time.Time) {
	if info.NBlocks > 0 {
		blocks := info.Blocks[:info.NBlocks]
		b.prefix.Insert(blocks)
		x := m.index.Load()
		if x == nil {
			m.SizePrefixIndex(config.Default().Route.Prefix.IndexEntries)
			x = m.index.Load()
		}
		x.Insert(blocks, b)
	}
	if info.ModelHash != 0 {
		b.lora.Note(info.ModelHash, now)
	}
}
