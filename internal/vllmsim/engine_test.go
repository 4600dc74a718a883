package vllmsim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

func newTestEngine(t testing.TB, mod func(*Config)) *Engine {
	t.Helper()
	cfg := DefaultConfig()
	if mod != nil {
		mod(&cfg)
	}
	e, err := NewEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// textOf returns a prompt text of about n tokens that starts with tag.
func textOf(tag string, n int) string {
	s := tag + strings.Repeat("abcdefghijklmnopqrstuvwxyz012345", n*BytesPerToken/32+1)
	return s[:n*BytesPerToken]
}

func req(i, promptTokens, maxTokens int) *Request {
	return &Request{
		Prompt:    HashText(16, "", "", textOf(fmt.Sprintf("request %d:", i), promptTokens)),
		MaxTokens: maxTokens, IgnoreEOS: true,
	}
}

func mustAdd(t testing.TB, e *Engine, r *Request) {
	t.Helper()
	if err := e.Add(r); err != nil {
		t.Fatal(err)
	}
}

// runUntilDone steps e until r finishes (or limit steps pass).
func runUntilDone(t testing.TB, e *Engine, r *Request) {
	t.Helper()
	for i := 0; !r.Done(); i++ {
		if i > 100000 {
			t.Fatal("request never finished")
		}
		e.Step()
	}
}

// openLoop offers Poisson arrivals at rate req/s of prompt/output sized requests
// for the virtual duration dur, then keeps stepping for drain. It calls onStep
// after every step and returns all requests and the output tokens generated
// during [0, dur).
func openLoop(t testing.TB, e *Engine, rate float64, dur, drain time.Duration, prompt, output int,
	onStep func(StepResult)) (reqs []*Request, tokensInWindow int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 7))
	next := time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
	for i := 0; ; {
		for next <= e.Now() && next < dur {
			r := req(i, prompt, output)
			i++
			mustAdd(t, e, r)
			reqs = append(reqs, r)
			next += time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
		}
		if e.Now() >= dur+drain {
			return reqs, tokensInWindow
		}
		if e.Idle() {
			if next >= dur {
				return reqs, tokensInWindow
			}
			e.AdvanceTo(next)
			continue
		}
		res := e.Step()
		if e.Now() <= dur {
			tokensInWindow += len(res.Events)
		}
		if onStep != nil {
			onStep(res)
		}
	}
}

func TestThroughputSaturates(t *testing.T) {
	const dur = 60 * time.Second
	var tput []float64
	rates := []float64{2, 10, 40, 80, 160}
	for _, rate := range rates {
		e := newTestEngine(t, nil)
		_, toks := openLoop(t, e, rate, dur, 0, 256, 128, nil)
		tput = append(tput, float64(toks)/dur.Seconds())
	}
	for i, r := range rates {
		t.Logf("offered %5.0f req/s (%6.0f tok/s): achieved %7.0f output tok/s", r, r*128, tput[i])
	}
	if lo := tput[0] / (rates[0] * 128); lo < 0.85 || lo > 1.15 {
		t.Errorf("light load: achieved/offered = %.2f, want ~1", lo)
	}
	for i := 1; i < len(tput); i++ {
		if tput[i] < tput[i-1]*0.95 {
			t.Errorf("throughput fell from %.0f to %.0f as load grew", tput[i-1], tput[i])
		}
	}
	last, prev := tput[len(tput)-1], tput[len(tput)-2]
	if last > prev*1.1 {
		t.Errorf("throughput still growing at overload: %.0f -> %.0f tok/s", prev, last)
	}
	if last > 0.7*rates[len(rates)-1]*128 {
		t.Errorf("overload throughput %.0f tok/s too close to offered %.0f", last, rates[len(rates)-1]*128)
	}
}

func TestRunningNeverExceedsMaxNumSeqs(t *testing.T) {
	e := newTestEngine(t, func(c *Config) { c.MaxNumSeqs = 32 })
	peak := 0
	openLoop(t, e, 100, 10*time.Second, 0, 128, 64, func(StepResult) {
		if n := e.Running(); n > 32 {
			t.Fatalf("running = %d > max_num_seqs 32", n)
		} else if n > peak {
			peak = n
		}
	})
	if peak != 32 {
		t.Errorf("peak running = %d, want the cap 32 reached under overload", peak)
	}
}

func TestWaitingGrowsThenDrains(t *testing.T) {
	e := newTestEngine(t, func(c *Config) { c.MaxNumSeqs = 64 })
	const dur = 20 * time.Second
	var atEnd, peak int
	reqs, _ := openLoop(t, e, 120, dur, 10*time.Minute, 256, 128, func(StepResult) {
		if e.Now() <= dur {
			atEnd = e.Waiting()
		}
		peak = max(peak, e.Waiting())
	})
	if atEnd < 200 {
		t.Errorf("waiting at end of overload = %d, want a growing queue (>= 200)", atEnd)
	}
	if e.Waiting() != 0 || e.Running() != 0 {
		t.Errorf("after drain: waiting %d running %d, want 0 0", e.Waiting(), e.Running())
	}
	for _, r := range reqs {
		if !r.Done() || r.Output() != 128 {
			t.Fatalf("request not completed after drain: done=%v output=%d", r.Done(), r.Output())
		}
	}
	if e.KVUse() != 0 {
		t.Errorf("KV use after drain = %v, want 0", e.KVUse())
	}
	t.Logf("waiting at end of overload %d, peak %d, %d requests", atEnd, peak, len(reqs))
}

func TestKVPressurePreempts(t *testing.T) {
	e := newTestEngine(t, func(c *Config) { c.NumGPUBlocks = 256 })
	var reqs []*Request
	for i := range 32 {
		r := req(i, 100, 400)
		mustAdd(t, e, r)
		reqs = append(reqs, r)
	}
	for step := 0; !e.Idle(); step++ {
		e.Step()
		if u := e.KVUse(); u > 1 || u < 0 {
			t.Fatalf("KV use %v out of [0,1]", u)
		}
		if step > 1e6 {
			t.Fatal("no progress")
		}
	}
	st := e.State()
	if st.Preemptions == 0 {
		t.Error("no preemption although 32 x 32 blocks were needed from 256")
	}
	for _, r := range reqs {
		if r.Output() != 400 || r.FinishReason() != FinishLength {
			t.Fatalf("request finished with %d tokens (%s), want 400 (length)", r.Output(), r.FinishReason())
		}
	}
	t.Logf("preemptions: %d", st.Preemptions)
}

func TestRepeatedPrefixCutsTTFT(t *testing.T) {
	e := newTestEngine(t, nil)
	shared := textOf("system prompt:", 4000)
	mk := func(suffix, salt string) *Request {
		return &Request{Prompt: HashText(16, "", salt, shared, suffix), MaxTokens: 8, IgnoreEOS: true}
	}
	a := mk("first question", "")
	mustAdd(t, e, a)
	runUntilDone(t, e, a)
	b := mk("second question, longer", "")
	mustAdd(t, e, b)
	runUntilDone(t, e, b)
	c := mk("second question, longer", "tenant-2")
	mustAdd(t, e, c)
	runUntilDone(t, e, c)
	t.Logf("TTFT cold %v, warm %v, warm with other cache_salt %v", a.TTFT(), b.TTFT(), c.TTFT())
	if b.TTFT() > a.TTFT()/4 {
		t.Errorf("warm TTFT %v not well below cold %v", b.TTFT(), a.TTFT())
	}
	if c.TTFT() < a.TTFT()*3/4 {
		t.Errorf("cache_salt did not isolate the cache: TTFT %v vs cold %v", c.TTFT(), a.TTFT())
	}
	st := e.State()
	if want := int64(3 * 4000); st.PrefixQueries < want {
		t.Errorf("prefix queries = %d tokens, want >= %d", st.PrefixQueries, want)
	}
	if st.PrefixHits < 3900 || st.PrefixHits > 4100 {
		t.Errorf("prefix hits = %d tokens, want ~4000 (the shared prefix, once)", st.PrefixHits)
	}
}

func TestPrefixCacheEvictsLRU(t *testing.T) {
	e := newTestEngine(t, func(c *Config) { c.NumGPUBlocks = 64 })
	a := req(1, 512, 1) // 32 blocks
	mustAdd(t, e, a)
	runUntilDone(t, e, a)
	// Two other prompts of 32 blocks each push a's blocks out.
	for i := 2; i <= 3; i++ {
		r := req(i, 512, 1)
		mustAdd(t, e, r)
		runUntilDone(t, e, r)
	}
	before := e.State().PrefixHits
	again := req(1, 512, 1)
	mustAdd(t, e, again)
	runUntilDone(t, e, again)
	if hits := e.State().PrefixHits - before; hits != 0 {
		t.Errorf("evicted prefix still hit %d tokens", hits)
	}
	// The most recent prompt is still cached.
	before = e.State().PrefixHits
	r3 := req(3, 512, 1)
	mustAdd(t, e, r3)
	runUntilDone(t, e, r3)
	if hits := e.State().PrefixHits - before; hits < 400 {
		t.Errorf("recent prefix hit only %d tokens", hits)
	}
}

func TestLoRAWaitsForSlot(t *testing.T) {
	e := newTestEngine(t, func(c *Config) {
		c.LoRAs = []string{"sql-lora", "chat-lora"}
		c.MaxLoRAs = 1
	})
	a := &Request{Adapter: "sql-lora", Prompt: HashText(16, "sql-lora", "", "select"), MaxTokens: 50, IgnoreEOS: true}
	mustAdd(t, e, a)
	first := e.Step()
	if want := e.Config().StepBase + e.Config().LoRALoadDelay; first.Duration < want {
		t.Errorf("step loading an adapter took %v, want >= %v", first.Duration, want)
	}
	b := &Request{Adapter: "chat-lora", Prompt: HashText(16, "chat-lora", "", "hello"), MaxTokens: 5, IgnoreEOS: true}
	base := &Request{Prompt: HashText(16, "", "", "base"), MaxTokens: 5, IgnoreEOS: true}
	mustAdd(t, e, b)
	mustAdd(t, e, base)
	for range 10 {
		e.Step()
	}
	st := e.State()
	if !slices.Equal(st.WaitingLoRAs, []string{"chat-lora"}) || !slices.Equal(st.RunningLoRAs, []string{"sql-lora"}) {
		t.Errorf("waiting/running adapters = %v / %v, want [chat-lora] / [sql-lora]", st.WaitingLoRAs, st.RunningLoRAs)
	}
	if b.Output() != 0 || !base.Done() {
		t.Errorf("chat-lora output %d (want 0, no slot), base done %v (want true: not blocked)", b.Output(), base.Done())
	}
	runUntilDone(t, e, a)
	runUntilDone(t, e, b)
	st = e.State()
	if st.AdapterLoads != 2 || !slices.Equal(st.LoadedLoRAs, []string{"chat-lora"}) {
		t.Errorf("adapter loads %d loaded %v, want 2 [chat-lora] (sql-lora evicted)", st.AdapterLoads, st.LoadedLoRAs)
	}
	if len(st.WaitingLoRAs) != 0 {
		t.Errorf("waiting adapters %v after all finished", st.WaitingLoRAs)
	}
	if err := e.Add(&Request{Adapter: "nope"}); err == nil {
		t.Error("unknown adapter accepted")
	}
}

func TestAbortFreesSeat(t *testing.T) {
	e := newTestEngine(t, func(c *Config) { c.MaxNumSeqs = 2 })
	r1, r2, r3 := req(1, 300, 100), req(2, 300, 100), req(3, 300, 100)
	for _, r := range []*Request{r1, r2, r3} {
		mustAdd(t, e, r)
	}
	e.Step()
	if e.Running() != 2 || e.Waiting() != 1 {
		t.Fatalf("running %d waiting %d, want 2 1", e.Running(), e.Waiting())
	}
	kv := e.KVUse()
	e.Abort(r1)
	if e.Running() != 1 || e.KVUse() >= kv {
		t.Errorf("after abort: running %d (want 1), KV %v (want < %v)", e.Running(), e.KVUse(), kv)
	}
	e.Step()
	if e.Running() != 2 || e.Waiting() != 0 || r3.Output() == 0 {
		t.Errorf("freed seat not reused: running %d waiting %d r3 output %d", e.Running(), e.Waiting(), r3.Output())
	}
	if r1.FinishReason() != FinishAbort || e.Stats().FinishedAbort != 1 {
		t.Errorf("abort not recorded: %q %d", r1.FinishReason(), e.Stats().FinishedAbort)
	}
	e.Abort(r2)
	e.Abort(r3)
	if e.KVUse() != 0 {
		t.Errorf("KV use %v after aborting all, want 0", e.KVUse())
	}
}

func TestOutputLengthAndDeterminism(t *testing.T) {
	run := func() []int {
		e := newTestEngine(t, func(c *Config) { c.Seed = 42 })
		var out []int
		var reqs []*Request
		for i := range 50 {
			r := req(i, 20, 64)
			r.IgnoreEOS = false
			mustAdd(t, e, r)
			reqs = append(reqs, r)
		}
		for !e.Idle() {
			e.Step()
		}
		for _, r := range reqs {
			if r.Output() < 1 || r.Output() > 64 {
				t.Fatalf("output %d outside [1,64]", r.Output())
			}
			if (r.Output() == 64) != (r.FinishReason() == FinishLength) {
				t.Fatalf("output %d with finish reason %s", r.Output(), r.FinishReason())
			}
			out = append(out, r.Output())
		}
		return out
	}
	a, b := run(), run()
	if !slices.Equal(a, b) {
		t.Error("same seed gave different output lengths")
	}
	if slices.Min(a) == slices.Max(a) {
		t.Error("output lengths do not vary")
	}
}

func TestTooLongRejected(t *testing.T) {
	e := newTestEngine(t, func(c *Config) { c.NumGPUBlocks = 64 }) // 1024 tokens
	if err := e.Add(req(1, 1000, 100)); err == nil {
		t.Error("request longer than the KV cache accepted")
	}
}

func TestIdleServerDoesNotStep(t *testing.T) {
	s := startServer(t, nil)
	c := newClient(t)
	resp := post(t, c, s.URL()+"/v1/completions", `{"model":"meta-llama/Llama-3.1-8B-Instruct","prompt":"x","max_tokens":3}`)
	resp.Body.Close()
	waitFor(t, func() bool { return s.State().Running == 0 })
	before := s.Stats().Steps
	time.Sleep(50 * time.Millisecond)
	if after := s.Stats().Steps; after != before {
		t.Errorf("idle server stepped %d times in 50ms", after-before)
	}
}

// TestPrefillCountersAsVLLM checks the prefill counters a proxy derives a
// pod's speed from, counted as vLLM V1 counts them: prompt_tokens_total
// when a request's prefill completes (its first token), cached tokens
// included; request_prefill_time_seconds (first admission to first token)
// and request_prefill_kv_computed_tokens (tokens not found cached) when it
// finishes. Three prompts admitted together share their prefill steps, so
// their prefill times overlap: the sum is three times the time spent.
func TestPrefillCountersAsVLLM(t *testing.T) {
	e := newTestEngine(t, nil)
	rs := []*Request{req(1, 2000, 3), req(2, 2000, 3), req(3, 2000, 3)}
	for _, r := range rs {
		mustAdd(t, e, r)
	}
	first := e.Step() // all three prefilled in one step (6,000 tokens < 8,192)
	if len(first.Events) != 3 {
		t.Fatalf("first step produced %d first tokens, want 3", len(first.Events))
	}
	if st := e.Stats(); st.PromptTokens != 6000 || st.PrefillTime.Count != 0 {
		t.Fatalf("after the prefill: prompt tokens %d (want 6000, counted at the first token), prefill times observed %d (want 0 before any finish)", st.PromptTokens, st.PrefillTime.Count)
	}
	for _, r := range rs {
		runUntilDone(t, e, r)
	}
	secs, toks := e.PrefillTotals()
	if want := 3 * first.Duration.Seconds(); math.Abs(secs-want) > 1e-9 || toks != 6000 {
		t.Fatalf("prefill totals %v s, %v tokens; want %v s (3 x the shared step) and 6000", secs, toks, want)
	}
	// The same prompt again: its cached blocks are not computed.
	again := &Request{Prompt: rs[0].Prompt, MaxTokens: 2, IgnoreEOS: true}
	mustAdd(t, e, again)
	runUntilDone(t, e, again)
	_, toks2 := e.PrefillTotals()
	if got := toks2 - toks; got < 1 || got > 16 {
		t.Fatalf("a fully cached prompt computed %v tokens, want the last block's tail at most", got)
	}
	if st := e.Stats(); st.PromptTokens != 8000 {
		t.Fatalf("prompt tokens %d, want 8000 (a cached prompt counts whole, as vLLM's counter)", st.PromptTokens)
	}
}
