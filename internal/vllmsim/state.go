package vllmsim

// State is the true load of one simulated server at an instant, for a benchmark's
// oracle and for tests. It is an immutable value: slices are never modified after
// the State is published.
type State struct {
	Running       int      `json:"running"`       // requests in the running batch
	Waiting       int      `json:"waiting"`       // requests queued
	KVUse         float64  `json:"kv_use"`        // 0..1, vLLM's kv_cache_usage_perc
	LoadedLoRAs   []string `json:"loaded_loras"`  // adapters on the GPU, LRU first
	RunningLoRAs  []string `json:"running_loras"` // adapters with running requests
	WaitingLoRAs  []string `json:"waiting_loras"` // adapters with waiting requests
	ServerLoad    int      `json:"server_load"`   // completion requests in flight at the HTTP layer
	AdapterLoads  int64    `json:"adapter_loads"`
	PrefixQueries int64    `json:"prefix_queries"` // tokens
	PrefixHits    int64    `json:"prefix_hits"`    // tokens
	Preemptions   int64    `json:"preemptions"`
	Finished      int64    `json:"finished"`
	Now           float64  `json:"now"` // engine virtual time, seconds
}
