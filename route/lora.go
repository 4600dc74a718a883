package route

import (
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/probegate/probegate/probe"
)

// adapterSet remembers which model-name hashes were ever reported as LoRA
// adapters by some backend, so that base-model requests are not steered by
// adapter slots. Direct-mapped and lock-free; a collision only forgets.
type adapterSet struct {
	slots [256]atomic.Uint64
}

// add records the adapter of hash h.
func (s *adapterSet) add(h uint64) {
	s.slots[h%uint64(len(s.slots))].Store(h)
}

// Has reports whether h was learned as an adapter.
func (s *adapterSet) Has(h uint64) bool {
	return h != 0 && s.slots[h%uint64(len(s.slots))].Load() == h
}

// loraSlots is the number of recently dispatched adapters remembered per
// backend.
const loraSlots = 16

// loraMemory remembers, per backend, which models (LoRA adapters or base
// models) this proxy sent it recently: a direct-mapped table of model hash
// and last-dispatch time. It stands in for reports until the backend's next
// report lists its loaded adapters. Safe for concurrent use, lock-free.
type loraMemory struct {
	hash [loraSlots]atomic.Uint64
	at   [loraSlots]atomic.Int64 // unix nanoseconds of the last dispatch
}

// Note records a dispatch of model hash h at now.
func (m *loraMemory) Note(h uint64, now time.Time) {
	if h == 0 {
		return
	}
	i := h % loraSlots
	m.hash[i].Store(h)
	m.at[i].Store(now.UnixNano())
}

// OthersSince counts the models other than h and base dispatched after
// since (unix ns) and within window before now: adapters that probably
// took slots since.
func (m *loraMemory) OthersSince(h, base uint64, since int64, now time.Time, window time.Duration) int {
	n := 0
	for i := range m.hash {
		x, at := m.hash[i].Load(), m.at[i].Load()
		if x != 0 && x != h && x != base && at > since && now.UnixNano()-at <= int64(window) {
			n++
		}
	}
	return n
}

// Last returns when h was last dispatched (unix ns), if within window.
func (m *loraMemory) Last(h uint64, now time.Time, window time.Duration) (int64, bool) {
	if h == 0 {
		return 0, false
	}
	i := h % loraSlots
	at := m.at[i].Load()
	if m.hash[i].Load() == h && now.UnixNano()-at <= int64(window) {
		return at, true
	}
	return 0, false
}

// loraScore scores a backend for a request naming model hash h: 1 when the
// model is believed loaded there, 0 when the request is for an adapter and
// the backend's adapter slots look full, 0.5 otherwise (neutral).
//
// vLLM reports only adapters with running or waiting requests, so an
// adapter that is loaded but idle is known only from this proxy's own
// dispatches: h sent there recently counts as loaded unless max_lora other
// adapters were sent there after it (it was then likely evicted). Slots
// look full when the report lists max_lora running adapters, or when
// max_lora other adapters were sent there recently. A request is for an
// adapter when adapter is true (its model differs from the base model the
// backend reports, or a backend listed it as an adapter); base-model
// requests are neutral unless recently dispatched to the backend.
func loraScore(h uint64, adapter bool, v *probe.View, mem *loraMemory, now time.Time, window time.Duration) float64 {
	if h == 0 {
		return 0.5
	}
	var base uint64
	if v.BaseModel != "" {
		base = xxhash.Sum64String(v.BaseModel)
	}
	if at, ok := mem.Last(h, now, window); ok {
		if !adapter || v.MaxLoRA <= 0 || mem.OthersSince(h, base, at, now, window) < v.MaxLoRA {
			return 1
		}
	}
	if !adapter || v.MaxLoRA <= 0 {
		return 0.5
	}
	for _, a := range v.RunningLoRAs {
		if xxhash.Sum64String(a) == h {
			return 1
		}
	}
	for _, a := range v.WaitingLoRAs {
		if xxhash.Sum64String(a) == h {
			return 1
		}
	}
	if len(v.RunningLoRAs) >= v.MaxLoRA || mem.OthersSince(h, base, 0, now, window) >= v.MaxLoRA {
		return 0
	}
	return 0.5
}
