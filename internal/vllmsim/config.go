package vllmsim

import (
	"errors"
	"fmt"
	"time"
)

// Config describes one simulated vLLM server. Zero-valued fields take the defaults of
// DefaultConfig when the Engine or Server is built, so a partially filled Config is
// fine. A Config is copied on use; changing it afterwards has no effect.
//
// Timing calibration (Llama-3.1-8B-Instruct, BF16, one H100-80GB-SXM, vLLM V1):
//
//   - Decode is memory-bound: each step streams the 16 GB of weights through HBM
//     (3.35 TB/s peak, ~4.8 ms floor); with launch and sampling overhead a step costs
//     StepBase = 6 ms, plus DecodePerSeq = 50 µs per sequence in the batch (sampling,
//     activations) and AttentionPerContextToken = 40 ns per token of context attended
//     (Llama-3.1-8B KV is 128 KiB per token: 32 layers x 8 KV heads x 128 x 2 x 2 B,
//     read at ~3.3 TB/s). At batch 64 with 1,000 tokens of context a step costs
//     6 + 3.2 + 2.6 = 11.8 ms, inside the 10-15 ms per decode step at batch 64 that
//     public vLLM benchmarks report for this model and GPU; at batch 1 ITL is ~6 ms
//     (~160 tok/s single stream). At batch 256 with 500 tokens of context the output
//     rate is ~10,700 tok/s, near the ~12,500 output tok/s published for vLLM with
//     Llama 3.1 8B on one H100 (morphllm.com/vllm-benchmarks, 2026 compilation of
//     third-party runs; Lambda Labs' vLLM benchmark reports the same order).
//   - Prefill is compute-bound: ~16 GFLOP per token at ~40% of the H100's 990 dense
//     BF16 TFLOP/s gives ~25k tok/s at best; published vLLM prefill rates for this
//     model are 10-20k tok/s. PrefillPerToken = 60 µs (16.7k tok/s): a lone
//     1,000-token prompt has a TTFT of ~66 ms.
//   - LoRALoadDelay = 25 ms per adapter activation (a rank-16 adapter of an 8B model
//     is ~30-50 MB moved host to device and set up); an assumption, not a measurement.
//   - NumGPUBlocks: a real H100 at gpu_memory_utilization 0.9 holds ~27,000 blocks
//     of 16 tokens (~430k tokens). The default here is 8,192 blocks (131k tokens) so
//     that benchmark-sized prompts produce visible KV pressure; raise it for realism.
type Config struct {
	// Model is the base model name served and reported in metrics.
	// Default "meta-llama/Llama-3.1-8B-Instruct".
	Model string
	// LoRAs names the LoRA adapters that may be requested as `model`. Default none.
	LoRAs []string
	// MaxLoRAs is vLLM's --max-loras: adapters active in one batch and loaded on the
	// GPU at once. Default 4.
	MaxLoRAs int
	// MaxNumSeqs caps the running batch (--max-num-seqs). Default 256.
	MaxNumSeqs int
	// MaxNumBatchedTokens is the token budget of one step (--max-num-batched-tokens),
	// shared between decodes and chunked prefill. Default 8192.
	MaxNumBatchedTokens int
	// BlockSize is the KV cache block size in tokens. Default 16.
	BlockSize int
	// NumGPUBlocks is the number of KV cache blocks. Default 8192.
	NumGPUBlocks int
	// MaxModelLen bounds prompt + max_tokens of one request; longer requests are
	// rejected with 400. Default and upper bound: NumGPUBlocks*BlockSize, at most
	// 131072.
	MaxModelLen int
	// DefaultMaxTokens is used when a request gives no max_tokens. Default 128.
	DefaultMaxTokens int

	// StepBase is the fixed cost of one engine step. Default 6ms.
	StepBase time.Duration
	// PrefillPerToken is the cost of each prompt token computed in a step. Default 60µs.
	PrefillPerToken time.Duration
	// DecodePerSeq is the cost of each decoding sequence in a step. Default 50µs.
	DecodePerSeq time.Duration
	// AttentionPerContextToken is the cost of each context token attended by a
	// decoding sequence in a step. Default 40ns.
	AttentionPerContextToken time.Duration
	// LoRALoadDelay is added to a step that loads an adapter onto the GPU. Default 25ms.
	LoRALoadDelay time.Duration

	// TimeScale multiplies every simulated duration when a Server runs in wall time
	// (0.1 = ten times faster than a real GPU). Default 1. The Engine ignores it.
	TimeScale float64
	// Seed seeds the output-length draws and fault injection. Default 0.
	Seed int64
	// Faults are the server's initial injected faults (see Server.SetFaults).
	Faults Faults
	// LowercaseHeaders makes the API answers carry lowercase header names
	// (endpoint-load-metrics, x-request-id, content-type), as uvicorn, which
	// serves vLLM, writes them. Default false (Go's canonical case).
	LowercaseHeaders bool
}

// DefaultConfig returns the calibrated defaults described on Config.
func DefaultConfig() Config {
	return Config{
		Model:                    "meta-llama/Llama-3.1-8B-Instruct",
		MaxLoRAs:                 4,
		MaxNumSeqs:               256,
		MaxNumBatchedTokens:      8192,
		BlockSize:                16,
		NumGPUBlocks:             8192,
		DefaultMaxTokens:         128,
		StepBase:                 6 * time.Millisecond,
		PrefillPerToken:          60 * time.Microsecond,
		DecodePerSeq:             50 * time.Microsecond,
		AttentionPerContextToken: 40 * time.Nanosecond,
		LoRALoadDelay:            25 * time.Millisecond,
		TimeScale:                1,
	}
}

// withDefaults fills zero fields from DefaultConfig and derives MaxModelLen.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Model == "" {
		c.Model = d.Model
	}
	if c.MaxLoRAs == 0 {
		c.MaxLoRAs = d.MaxLoRAs
	}
	if c.MaxNumSeqs == 0 {
		c.MaxNumSeqs = d.MaxNumSeqs
	}
	if c.MaxNumBatchedTokens == 0 {
		c.MaxNumBatchedTokens = d.MaxNumBatchedTokens
	}
	if c.BlockSize == 0 {
		c.BlockSize = d.BlockSize
	}
	if c.NumGPUBlocks == 0 {
		c.NumGPUBlocks = d.NumGPUBlocks
	}
	if c.DefaultMaxTokens == 0 {
		c.DefaultMaxTokens = d.DefaultMaxTokens
	}
	if c.StepBase == 0 {
		c.StepBase = d.StepBase
	}
	if c.PrefillPerToken == 0 {
		c.PrefillPerToken = d.PrefillPerToken
	}
	if c.DecodePerSeq == 0 {
		c.DecodePerSeq = d.DecodePerSeq
	}
	if c.AttentionPerContextToken == 0 {
		c.AttentionPerContextToken = d.AttentionPerContextToken
	}
	if c.LoRALoadDelay == 0 {
		c.LoRALoadDelay = d.LoRALoadDelay
	}
	if c.TimeScale == 0 {
		c.TimeScale = d.TimeScale
	}
	limit := c.NumGPUBlocks * c.BlockSize
	if limit > 131072 {
		limit = 131072
	}
	if c.MaxModelLen <= 0 || c.MaxModelLen > limit {
		c.MaxModelLen = limit
	}
	c.LoRAs = append([]string(nil), c.LoRAs...)
	return c
}

// Validate reports the first problem of c (after defaults are applied), naming the
// field. A Config that passes is safe for NewEngine and NewServer.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	pos := func(name string, v int) {
		if v < 0 {
			errs = append(errs, fmt.Errorf("%s: must be > 0, got %d", name, v))
		}
	}
	pos("MaxLoRAs", c.MaxLoRAs)
	pos("MaxNumSeqs", c.MaxNumSeqs)
	pos("MaxNumBatchedTokens", c.MaxNumBatchedTokens)
	pos("BlockSize", c.BlockSize)
	pos("NumGPUBlocks", c.NumGPUBlocks)
	pos("DefaultMaxTokens", c.DefaultMaxTokens)
	if c.TimeScale < 0 {
		errs = append(errs, fmt.Errorf("TimeScale: must be > 0, got %g", c.TimeScale))
	}
	if c.Faults.FailRate < 0 || c.Faults.FailRate > 1 {
		errs = append(errs, fmt.Errorf("Faults.FailRate: must be in [0,1], got %g", c.Faults.FailRate))
	}
	if c.Faults.Slowdown < 0 {
		errs = append(errs, fmt.Errorf("Faults.Slowdown: must be >= 0, got %g", c.Faults.Slowdown))
	}
	seen := map[string]bool{c.Model: true}
	for _, l := range c.LoRAs {
		if l == "" || seen[l] {
			errs = append(errs, fmt.Errorf("LoRAs: empty or duplicate name %q", l))
		}
		seen[l] = true
	}
	return errors.Join(errs...)
}
