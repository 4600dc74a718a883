package vllmsim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// Finish reasons, as vLLM reports them.
const (
	FinishStop   = "stop"
	FinishLength = "length"
	FinishAbort  = "abort"
)

// Errors returned by Engine.Add.
var (
	ErrTooLong        = errors.New("vllmsim: prompt + max_tokens exceeds the maximum context length")
	ErrUnknownAdapter = errors.New("vllmsim: unknown LoRA adapter")
	ErrAlreadyAdded   = errors.New("vllmsim: request already added")
)

type reqState uint8

const (
	stateNew reqState = iota
	stateWaiting
	stateRunning
	stateFinished
)

// Request is one generation request inside an Engine. The caller fills the exported
// fields before Engine.Add and must not change them afterwards; the engine owns the
// rest. Its methods read engine-owned progress and, like the Engine, are not safe
// for use concurrently with Engine calls.
type Request struct {
	// Adapter names the LoRA adapter, "" for the base model.
	Adapter string
	// Prompt is the tokenized prompt (see HashText, HashTokenIDs).
	Prompt Prompt
	// MaxTokens bounds the output; <= 0 means Config.DefaultMaxTokens.
	MaxTokens int
	// IgnoreEOS makes the request generate exactly MaxTokens tokens; otherwise it
	// stops after a number of tokens drawn uniformly in [1, MaxTokens] from the
	// engine's seeded generator (finish reason "stop" below MaxTokens, "length" at it).
	IgnoreEOS bool
	// Tag is opaque to the engine (a Server keeps its stream handle here).
	Tag any

	state        reqState
	target       int
	numComputed  int
	output       int
	committed    int // prompt blocks registered in the prefix cache
	schedN       int
	everRan      bool
	blocks       []int32
	arrival      time.Duration
	scheduled    time.Duration // first admission to the running batch
	computedKV   int           // prompt tokens prefilled at first admission (not cached)
	firstToken   time.Duration
	lastToken    time.Duration
	finishReason string
}

// Output is the number of tokens generated so far.
func (r *Request) Output() int { return r.output }

// Target is the number of tokens the request will generate unless aborted.
func (r *Request) Target() int { return r.target }

// Done reports whether the request finished (including by abort).
func (r *Request) Done() bool { return r.state == stateFinished }

// FinishReason is "stop", "length" or "abort" once Done, else "".
func (r *Request) FinishReason() string { return r.finishReason }

// TTFT is the virtual time from Add to the first token, or 0 before it.
func (r *Request) TTFT() time.Duration {
	if r.output == 0 {
		return 0
	}
	return r.firstToken - r.arrival
}

func (r *Request) numTokens() int { return r.Prompt.Tokens + r.output }

// Event reports what one step did to one request.
type Event struct {
	Req      *Request
	Output   int    // tokens generated so far (this step added one)
	Finished bool   // the request finished in this step
	Reason   string // finish reason when Finished
}

// StepResult describes one engine step.
type StepResult struct {
	// Idle is true when there was nothing to do; the clock did not move.
	Idle bool
	// Duration is the modelled length of the step; the clock advanced by it.
	Duration time.Duration
	// Batch is the number of requests scheduled; PrefillTokens and DecodeSeqs
	// split their work.
	Batch, PrefillTokens, DecodeSeqs int
	// Events lists the requests that produced a token. The slice is reused by the
	// next Step.
	Events []Event
}

// Engine is a deterministic model of one vLLM V1 engine in virtual time. It owns no
// goroutine and reads no clock. It is not safe for concurrent use: a Server
// serializes access with a mutex.
//
// Scheduling per Step follows vLLM V1's scheduler: the token budget
// (MaxNumBatchedTokens) first goes to running requests in admission order (decodes
// take one token; a request admitted with a partial prefill chunk continues it),
// allocating KV blocks as needed and, when none are free, preempting the most
// recently admitted running request (its blocks are freed and it returns to the
// front of the waiting queue, to be recomputed). If nothing was preempted, waiting
// requests are admitted FCFS while budget, batch seats (MaxNumSeqs) and blocks
// remain; their cached prefix blocks are reused and only the rest is prefilled, in
// chunks if the budget is short. A waiting request whose adapter cannot join the
// batch (MaxLoRAs other adapters running) is skipped and keeps its place.
type Engine struct {
	cfg      Config
	now      time.Duration
	slowdown float64
	rng      *rand.Rand
	kv       *kvCache
	lora     *loraSlots
	adapters map[string]bool

	waiting []*Request
	running []*Request
	sched   []*Request
	skipped []*Request
	events  []Event
	stats   Stats

	loaded, runLoRAs, waitLoRAs []string
}

// NewEngine returns an idle engine at virtual time 0 for cfg (defaults filled in).
func NewEngine(cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	e := &Engine{
		cfg:      cfg,
		slowdown: 1,
		rng:      rand.New(rand.NewPCG(uint64(cfg.Seed), 0x76_6c_6c_6d)),
		kv:       newKVCache(cfg.NumGPUBlocks, cfg.BlockSize),
		lora:     newLoRASlots(cfg.MaxLoRAs),
		adapters: make(map[string]bool, len(cfg.LoRAs)),
		stats:    newStats(),
	}
	for _, a := range cfg.LoRAs {
		e.adapters[a] = true
	}
	return e, nil
}

// Config returns the engine's configuration with defaults filled in.
func (e *Engine) Config() Config { return e.cfg }

// Now is the engine's virtual time.
func (e *Engine) Now() time.Duration { return e.now }

// AdvanceTo moves the virtual clock forward to t (never backwards): time passing
// while the engine is idle or waiting for its driver.
func (e *Engine) AdvanceTo(t time.Duration) {
	if t > e.now {
		e.now = t
	}
}

// SetSlowdown multiplies the duration of following steps by f (f <= 1: no slowdown).
func (e *Engine) SetSlowdown(f float64) {
	if f < 1 {
		f = 1
	}
	e.slowdown = f
}

// StepDuration is the modelled duration of one step that computes prefill
// prompt tokens and decodes one token for each of decodes sequences holding
// ctx context tokens in all, loading loads LoRA adapters, at the engine's
// slowdown. Step uses it; so can a model of the engine that must cost its
// steps the same way.
func (e *Engine) StepDuration(prefill, decodes, ctx, loads int) time.Duration {
	c := &e.cfg
	d := c.StepBase +
		time.Duration(prefill)*c.PrefillPerToken +
		time.Duration(decodes)*c.DecodePerSeq +
		time.Duration(ctx)*c.AttentionPerContextToken +
		time.Duration(loads)*c.LoRALoadDelay
	if e.slowdown > 1 {
		d = time.Duration(float64(d) * e.slowdown)
	}
	return d
}

// Idle reports whether no request is waiting or running.
func (e *Engine) Idle() bool { return len(e.running) == 0 && len(e.waiting) == 0 }

// Running is the size of the running batch.
func (e *Engine) Running() int { return len(e.running) }

// Waiting is the length of the waiting queue.
func (e *Engine) Waiting() int { return len(e.waiting) }

// KVUse is the share of KV blocks in use (0..1).
func (e *Engine) KVUse() float64 { return e.kv.usage() }

// Stats returns a copy of the cumulative counters and histograms.
func (e *Engine) Stats() Stats { return e.stats }

// Add queues r, arriving now. It fails if r was added before, names an unknown
// adapter, or asks for more than MaxModelLen tokens in total.
func (e *Engine) Add(r *Request) error { return e.AddAt(r, e.now) }

// AddAt is Add for a request that arrived at virtual time at, which may lie
// before Now (during the step in flight); latencies are measured from at.
func (e *Engine) AddAt(r *Request, at time.Duration) error {
	if r.state != stateNew {
		return ErrAlreadyAdded
	}
	if r.Adapter != "" && !e.adapters[r.Adapter] {
		return fmt.Errorf("%w %q", ErrUnknownAdapter, r.Adapter)
	}
	if r.MaxTokens <= 0 {
		r.MaxTokens = e.cfg.DefaultMaxTokens
	}
	if r.Prompt.Tokens <= 0 {
		r.Prompt.Tokens = 1
	}
	if total := r.Prompt.Tokens + r.MaxTokens; total > e.cfg.MaxModelLen {
		return fmt.Errorf("%w: this model's maximum context length is %d tokens, but %d were requested (%d in the prompt, %d for the completion)",
			ErrTooLong, e.cfg.MaxModelLen, total, r.Prompt.Tokens, r.MaxTokens)
	}
	r.target = r.MaxTokens
	if !r.IgnoreEOS {
		r.target = 1 + e.rng.IntN(r.MaxTokens)
	}
	r.arrival = min(at, e.now)
	r.state = stateWaiting
	e.waiting = append(e.waiting, r)
	if r.Adapter != "" {
		e.lora.enqueue(r.Adapter)
	}
	return nil
}

// Abort removes r from the engine, freeing its seat and KV blocks; it then reports
// finish reason "abort". Aborting a finished or never-added request does nothing.
func (e *Engine) Abort(r *Request) {
	switch r.state {
	case stateWaiting:
		if i := slices.Index(e.waiting, r); i >= 0 {
			e.waiting = slices.Delete(e.waiting, i, i+1)
		}
		if r.Adapter != "" {
			e.lora.dequeue(r.Adapter)
		}
	case stateRunning:
		if i := slices.Index(e.running, r); i >= 0 {
			e.running = slices.Delete(e.running, i, i+1)
		}
		if r.Adapter != "" {
			e.lora.stop(r.Adapter)
		}
	default:
		return
	}
	e.kv.free(r.blocks)
	r.blocks = nil
	r.state = stateFinished
	r.finishReason = FinishAbort
	e.stats.FinishedAbort++
}

func blocksFor(tokens, bs int) int { return (tokens + bs - 1) / bs }

// Step schedules one batch, advances the clock by its modelled duration and applies
// its results: each scheduled request whose prompt (or recompute) is complete
// produces one token; requests reaching their target finish and free their blocks.
func (e *Engine) Step() StepResult {
	e.events = e.events[:0]
	if e.Idle() {
		return StepResult{Idle: true}
	}
	bs := e.cfg.BlockSize
	budget := e.cfg.MaxNumBatchedTokens
	e.sched = e.sched[:0]
	preempted := false

	for i := 0; i < len(e.running) && budget > 0; {
		r := e.running[i]
		n := min(r.numTokens()-r.numComputed, budget)
		need := blocksFor(r.numComputed+n, bs) - len(r.blocks)
		for need > e.kv.numFree {
			v := e.running[len(e.running)-1]
			e.running = e.running[:len(e.running)-1]
			e.preempt(v)
			preempted = true
			if v == r {
				break
			}
		}
		if r.state != stateRunning {
			break // r preempted itself: it was the last running request
		}
		if need > 0 {
			r.blocks = e.kv.alloc(need, r.blocks)
		}
		r.schedN = n
		e.sched = append(e.sched, r)
		budget -= n
		i++
	}

	loads := 0
	if !preempted {
		e.skipped = e.skipped[:0]
		for len(e.waiting) > 0 && budget > 0 && len(e.running) < e.cfg.MaxNumSeqs {
			r := e.waiting[0]
			if r.Adapter != "" && !e.lora.canRun(r.Adapter) {
				e.waiting = e.waiting[1:]
				e.skipped = append(e.skipped, r)
				continue
			}
			total := r.numTokens()
			// At least the last token is always computed, as in vLLM.
			hits, hitsFree := e.kv.probe(r.Prompt.BlockHashes, (total-1)/bs)
			computed := hits * bs
			n := min(total-computed, budget)
			need := blocksFor(computed+n, bs) - hits
			if need > e.kv.numFree-hitsFree {
				break
			}
			e.waiting = e.waiting[1:]
			r.blocks = e.kv.touch(r.Prompt.BlockHashes, hits, r.blocks[:0])
			r.blocks = e.kv.alloc(need, r.blocks)
			r.numComputed = computed
			r.committed = hits
			if !r.everRan {
				r.everRan = true
				e.stats.PrefixQueries += int64(r.Prompt.Tokens)
				e.stats.PrefixHits += int64(min(computed, r.Prompt.Tokens))
				e.stats.QueueTime.observeN((e.now - r.arrival).Seconds(), 1)
				r.scheduled = e.now
				r.computedKV = max(r.Prompt.Tokens-computed, 0)
			}
			r.state = stateRunning
			e.running = append(e.running, r)
			if r.Adapter != "" {
				e.lora.dequeue(r.Adapter)
				if e.lora.start(r.Adapter) {
					loads++
					e.stats.AdapterLoads++
				}
			}
			r.schedN = n
			e.sched = append(e.sched, r)
			budget -= n
		}
		if len(e.skipped) > 0 {
			w := make([]*Request, 0, len(e.skipped)+len(e.waiting))
			e.waiting = append(append(w, e.skipped...), e.waiting...)
		}
	}

	res := StepResult{Batch: len(e.sched)}
	ctx := 0
	for _, r := range e.sched {
		if r.schedN == 1 && r.numComputed >= r.Prompt.Tokens {
			res.DecodeSeqs++
			ctx += r.numComputed
		} else {
			res.PrefillTokens += r.schedN
		}
	}
	d := e.StepDuration(res.PrefillTokens, res.DecodeSeqs, ctx, loads)
	res.Duration = d
	e.now += d
	e.stats.Steps++

	finished := 0
	for _, r := range e.sched {
		r.numComputed += r.schedN
		r.schedN = 0
		for r.committed < len(r.Prompt.BlockHashes) && (r.committed+1)*bs <= r.numComputed {
			e.kv.commit(r.blocks[r.committed], r.Prompt.BlockHashes[r.committed])
			r.committed++
		}
		if r.numComputed < r.numTokens() {
			continue // partial prefill chunk
		}
		r.output++
		e.stats.GenerationTokens++
		if r.output == 1 {
			r.firstToken = e.now
			e.stats.TTFT.observeN((e.now - r.arrival).Seconds(), 1)
			// As vLLM V1: a request's prompt counts when its prefill
			// completes (its first token), cached tokens included.
			e.stats.PromptTokens += int64(r.Prompt.Tokens)
		} else {
			e.stats.ITL.observeN((e.now - r.lastToken).Seconds(), 1)
		}
		r.lastToken = e.now
		ev := Event{Req: r, Output: r.output}
		if r.output >= r.target {
			reason := FinishStop
			if r.target >= r.MaxTokens {
				reason = FinishLength
			}
			e.finish(r, reason)
			ev.Finished, ev.Reason = true, reason
			finished++
		}
		e.events = append(e.events, ev)
	}
	if finished > 0 {
		e.running = slices.DeleteFunc(e.running, func(r *Request) bool { return r.state == stateFinished })
	}
	res.Events = e.events
	return res
}

func (e *Engine) finish(r *Request, reason string) {
	e.kv.free(r.blocks)
	r.blocks = nil
	r.state = stateFinished
	r.finishReason = reason
	if r.Adapter != "" {
		e.lora.stop(r.Adapter)
	}
	if reason == FinishStop {
		e.stats.FinishedStop++
	} else {
		e.stats.FinishedLength++
	}
	e.stats.E2E.observeN((e.now - r.arrival).Seconds(), 1)
	if r.output > 0 {
		// As vLLM V1's FinishedRequestStats: observed when the request
		// finishes, for requests that produced a token.
		e.stats.PrefillTime.observeN((r.firstToken - r.scheduled).Seconds(), 1)
		e.stats.PrefillComputed.observeN(float64(r.computedKV), 1)
	}
	e.stats.PromptLen.observeN(float64(r.Prompt.Tokens), 1)
	e.stats.GenerateLen.observeN(float64(r.output), 1)
}

// preempt frees v's blocks and puts it back at the front of the waiting queue, to be
// recomputed (prompt and tokens generated so far) when admitted again.
func (e *Engine) preempt(v *Request) {
	e.kv.free(v.blocks)
	v.blocks = v.blocks[:0]
	v.numComputed = 0
	v.committed = 0
	v.state = stateWaiting
	e.waiting = slices.Insert(e.waiting, 0, v)
	if v.Adapter != "" {
		e.lora.stop(v.Adapter)
		e.lora.enqueue(v.Adapter)
	}
	e.stats.Preemptions++
}

// State returns the engine's true state now (ServerLoad is left 0).
func (e *Engine) State() State {
	if e.lora.dirty {
		e.loaded, e.runLoRAs, e.waitLoRAs = e.lora.names()
	}
	return State{
		Running:       len(e.running),
		Waiting:       len(e.waiting),
		KVUse:         e.kv.usage(),
		LoadedLoRAs:   e.loaded,
		RunningLoRAs:  e.runLoRAs,
		WaitingLoRAs:  e.waitLoRAs,
		AdapterLoads:  e.stats.AdapterLoads,
		PrefixQueries: e.stats.PrefixQueries,
		PrefixHits:    e.stats.PrefixHits,
		Preemptions:   e.stats.Preemptions,
		Finished:      e.stats.Finished(),
		Now:           e.now.Seconds(),
	}
}

// ReqWork is one queued or running request's progress, as Engine.Each
// reports it: what a perfectly informed router could know about a server.
type ReqWork struct {
	Running  bool // in the running batch (else waiting, in FCFS order)
	Tokens   int  // prompt tokens plus tokens generated so far
	Computed int  // tokens whose KV is computed (prefill progress)
	Output   int  // tokens generated so far
	Target   int  // tokens it will generate
}

// Each calls f for every running request in admission order, then every
// waiting one in queue order. It reads the engine's state as of its last
// step (which, while a step is in flight, already includes that step's
// progress: the step ends at Now).
func (e *Engine) Each(f func(ReqWork)) {
	for _, r := range e.running {
		f(ReqWork{Running: true, Tokens: r.numTokens(), Computed: r.numComputed, Output: r.output, Target: r.target})
	}
	for _, r := range e.waiting {
		f(ReqWork{Tokens: r.numTokens(), Computed: r.numComputed, Output: r.output, Target: r.target})
	}
}

// Slowdown is the step-duration multiplier set by SetSlowdown (1: none).
func (e *Engine) Slowdown() float64 { return e.slowdown }

// CachedTokens is how many leading tokens of p the prefix cache holds now
// (whole blocks), as admission would find them. It changes nothing.
func (e *Engine) CachedTokens(p Prompt) int {
	hits, _ := e.kv.probe(p.BlockHashes, len(p.BlockHashes))
	return hits * e.cfg.BlockSize
}
