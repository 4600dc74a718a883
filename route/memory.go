package route

import (
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/probe"
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
	// loras finds the backends an adapter is loaded on (reported) or was
	// recently sent to, for pools too large to scan per request; nil until
	// the first adapter is learned. Same structure as index, one hash per
	// adapter.
	loras atomic.Pointer[prefixIndex]
}

// loraIndexEntries is the adapter index's size: distinct adapters a proxy
// can remember holders for before they evict each other (direct-mapped).
// vLLM serves at most a few hundred adapters per base model.
const loraIndexEntries = 1024

// adapterIndex returns the adapter index, creating it.
func (m *Memory) adapterIndex() *prefixIndex {
	if x := m.loras.Load(); x != nil {
		return x
	}
	m.loras.CompareAndSwap(nil, newPrefixIndex(loraIndexEntries))
	return m.loras.Load()
}

// isAdapter reports whether info's model is a LoRA adapter as far as b
// can tell: some backend listed it as one, or b reports a different base
// model.
func (m *Memory) isAdapter(info *RequestInfo, b *Backend) bool {
	if m.adapters.Has(info.ModelHash) {
		return true
	}
	l := b.state.Latest()
	return l != nil && l.BaseModel != "" && string(info.Model) != l.BaseModel
}

// learnAdapters records the adapters v lists (running or waiting) as
// adapters, and as loaded on b in the adapter index. Called for every
// view a picker reads with LoRA information.
func (m *Memory) learnAdapters(v *probe.View, b *Backend) {
	if len(v.RunningLoRAs)+len(v.WaitingLoRAs) == 0 {
		return
	}
	x := m.adapterIndex()
	for _, list := range [2][]string{v.RunningLoRAs, v.WaitingLoRAs} {
		for _, a := range list {
			h := xxhash.Sum64String(a)
			m.adapters.add(h)
			x.add(h, b)
		}
	}
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
// proxy-wide index) and its model loaded there (prefix and LoRA affinity;
// a known adapter is also listed under b in the adapter index).
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
		if m.isAdapter(info, b) {
			m.adapterIndex().add(info.ModelHash, b)
		}
	}
}
