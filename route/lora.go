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

// Learn records every adapter listed in v.
func (s *adapterSet) Learn(v *probe.View) {
	for _, a := range v.RunningLoRAs {
		h := xxhash.Sum64String(a)
		s.slots[h%uint64(len(s.slots))].Store(h)
	}
	for _, a := range v.WaitingLoRAs {
		h := xxhash.Sum64String(a)
		s.slots[h%uint64(len(s.slots))].Store(h)
	}
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

// Recent reports whether h was dispatched within window before now.
func (m *loraMemory) Recent(h uint64, now time.Time, window time.Duration) bool {
	if h == 0 {
		return false
	}
	i := h % loraSlots
	return m.hash[i].Load() == h && now.UnixNano()-m.at[i].Load() <= int64(window)
}

// loraScore scores a backend for a request naming model hash h: 1 when the
// adapter is loaded there (reported running or waiting, or dispatched here
// recently), 0.5 when the backend has a free adapter slot, 0 otherwise.
// Requests for a base model (adapter false) or for no model score 0.5 on
// every backend, so the scorer is neutral for them; so do backends that
// report no LoRA state.
func loraScore(h uint64, adapter bool, v *probe.View, mem *loraMemory, now time.Time, window time.Duration) float64 {
	if h == 0 || !adapter {
		return 0.5
	}
	if mem.Recent(h, now, window) {
		return 1
	}
	if v.MaxLoRA <= 0 {
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
	if len(v.RunningLoRAs) < v.MaxLoRA {
		return 0.5
	}
	return 0
}
