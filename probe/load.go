// Package probe answers "how loaded is backend X now?". It holds the Load
// snapshot type, the parsers for the signals model servers emit (vLLM's
// /metrics, /load, ORCA endpoint-load-metrics headers), the per-backend State
// that merges reports with this proxy's own dispatch counts, the asynchronous
// scraper and the synchronous hedged prober.
package probe

import "time"

// Source says where a Load came from.
type Source uint8

// Sources of load knowledge, in the order of the decisions_total label.
const (
	SourceNone   Source = iota // no report: only local in-flight counts
	SourceProbe                // synchronous probe on the request path
	SourceORCA                 // endpoint-load-metrics response header
	SourceScrape               // asynchronous scrape loop
	SourceLocal                // local in-flight count alone (no fresh report)
	SourceOracle               // benchmark oracle: the simulator's true state
)

// String returns the metric label for s.
func (s Source) String() string {
	switch s {
	case SourceProbe:
		return "probe"
	case SourceORCA:
		return "orca"
	case SourceScrape:
		return "scrape"
	case SourceLocal:
		return "local"
	case SourceOracle:
		return "oracle"
	}
	return "none"
}

// Load is an immutable, timestamped snapshot of one backend's load. A Load is
// never modified after it is published; share it by pointer freely.
//
// Fields a source does not report hold their "unknown" value: -1 for counts,
// a negative KVUse, nil adapter lists with MaxLoRA 0.
type Load struct {
	Running    int     // requests in the running batch (vllm:num_requests_running)
	Waiting    int     // queued requests (vllm:num_requests_waiting)
	KVUse      float64 // KV-cache use, 0..1 (vllm:kv_cache_usage_perc)
	ServerLoad int     // in-flight requests of the API server (/load), -1 if unknown

	// LoRA state from vllm:lora_requests_info (the series with the newest
	// timestamp value).
	MaxLoRA      int      // 0 if unknown
	RunningLoRAs []string // adapters with running requests
	WaitingLoRAs []string // adapters with waiting requests

	// BaseModel is the base model the server serves (the model_name label
	// of vLLM's gauges); "" if unknown. A requested model that differs
	// from it is a LoRA adapter.
	BaseModel string

	// Tokens is the backend's count of tokens processed since it started
	// (vllm:prompt_tokens_total + vllm:generation_tokens_total, summed over
	// series): a counter whose advance between two reports shows that the
	// engine is working (State.ProgressedSince). 0 when unknown: /load
	// answers and ORCA headers carry no counter, and a pod that has
	// processed nothing yet shows no progress either.
	Tokens float64

	// PrefillSeconds and PrefillTokens are the server's prefill counters,
	// cumulative since it started; 0 when not reported (a /load answer,
	// an ORCA header, a server without the families). PrefillSeconds is
	// the sum of vllm:request_prefill_time_seconds (per request, first
	// scheduling to first token, observed when the request finishes);
	// PrefillTokens the sum of vllm:request_prefill_kv_computed_tokens
	// (the prompt tokens those prefills computed), or of
	// vllm:request_prompt_tokens, cached tokens included, on a vLLM
	// without it. Both are observed at the same moment, so their deltas
	// between two reports cover the same requests: State.Report derives
	// the pod's prefill speed from them (podspeed.go).
	PrefillSeconds, PrefillTokens float64

	At     time.Time // when the report was taken (receive time at this proxy)
	Source Source
}

// Queue returns running + waiting, the queue-length signal the scorers use.
// When only ServerLoad is known (the /load endpoint) it returns ServerLoad.
// It returns -1 when nothing is known.
func (l *Load) Queue() int {
	if l.Running >= 0 && l.Waiting >= 0 {
		return l.Running + l.Waiting
	}
	if l.ServerLoad >= 0 {
		return l.ServerLoad
	}
	return -1
}

// Unknown returns a Load that reports nothing, stamped at t.
func Unknown(t time.Time, src Source) Load {
	return Load{Running: -1, Waiting: -1, KVUse: -1, ServerLoad: -1, At: t, Source: src}
}
