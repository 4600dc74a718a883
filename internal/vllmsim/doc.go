// Package vllmsim simulates a fleet of vLLM model servers (V1 engine) speaking the
// OpenAI-compatible HTTP API, so that routing policies can be developed, tested and
// benchmarked without GPUs.
//
// The model has two layers:
//
//   - Engine is a pure, single-threaded model of one vLLM engine in virtual time:
//     continuous batching with a token budget per step shared between decodes and
//     chunked prefill (vLLM V1 scheduler), a FCFS waiting queue, a paged KV cache with
//     recompute preemption, automatic prefix caching with chained block hashes, and
//     LoRA adapter slots. It has no goroutines and reads no clock: Step advances its
//     virtual clock by the modelled duration of one forward pass.
//   - Server wraps one Engine with an HTTP listener and a goroutine that runs steps in
//     wall time (sleeping each step's duration times Config.TimeScale) and hands the
//     produced tokens to the waiting HTTP handlers. Fleet starts several Servers.
//
// Tokenization is approximated: a text prompt counts one token per 4 bytes (rounded
// up), chat messages are rendered as "<|role|>\n" + content + "\n" per message and
// counted the same way, and a token-id prompt counts one token per id. Prefix-cache
// block hashes are computed over those bytes (or ids), chained from a seed that
// depends on the LoRA adapter and the request's cache_salt, as vLLM chains its block
// hashes. Generated text is a fixed cycle of short words, one word per token.
//
// HTTP surface of a Server (vLLM's shapes and framing): POST /v1/completions and
// /v1/chat/completions (streaming SSE or one JSON answer with usage; ORCA
// endpoint-load-metrics on non-streaming answers when asked with
// endpoint-load-metrics-format TEXT or JSON; X-Request-Id echoed), GET /v1/models,
// /health, /version, /load ({"server_load":N}), /metrics (vLLM's Prometheus text
// exposition, ~33 KB) and, for benchmarks, /sim/state (the true State as JSON).
// Errors use vLLM's envelope {"error":{"message","type","param","code"}}.
//
// Time: the Engine counts simulated (GPU) time. A Server sleeps each step's
// simulated duration times Config.TimeScale; latency histograms in /metrics and
// State.Now are in simulated seconds (wall time / TimeScale). Fault delays
// (Faults.ProbeDelay) are wall time and are not scaled.
//
// The package imports nothing from the rest of this module, so any package's tests
// can use it.
package vllmsim
