package route

import "sync/atomic"

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
}
