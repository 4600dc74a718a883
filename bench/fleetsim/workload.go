package fleetsim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/probegate/probegate/bench"
	"github.com/probegate/probegate/internal/vllmsim"
)

// Job is one request of a run: when it reaches its replica and its size.
type Job struct {
	At        time.Duration
	Prompt    vllmsim.Prompt
	MaxTokens int // exact output length (ignore_eos, as the bench sends)
	// Text, when set, is the prompt's text: the replica reads the request's
	// routing fields (prefix block hashes included) from a completion body
	// holding it, as the proxy does, and Prompt hashes it for the pods'
	// prefix caches.
	Text string
}

// Workload draws request sizes and arrival gaps: the bench's size
// distributions (bench.SizesUniform, bench.SizesLognormal) with Poisson
// arrivals, or a trace's sizes and inter-arrival gaps (bench.LoadTrace),
// gaps rescaled to the target rate.
type Workload struct {
	Name string
	// Sizes draws one request's prompt and output token counts. Nil for a
	// trace workload.
	Sizes func(rng *rand.Rand) (prompt, output int)
	// Trace is the replayed trace (nil for synthetic workloads).
	Trace []bench.TraceRow
	// KVBlocks is the pods' KV cache size for this workload (the bench's
	// choice: 512 blocks for uniform sizes, 1024 for the code trace's).
	KVBlocks int
	// Shape is a synthetic workload's arrival process (arrivals.go):
	// "" or ArrivalsPoisson for a steady Poisson process, ArrivalsOnOff or
	// ArrivalsRamp for a Poisson process whose rate varies around the mean.
	// Ignored for a trace workload, which keeps the trace's own gaps.
	Shape string
}

// UniformWorkload is the bench's -sizes uniform: a prompt of "Request i: "
// and 400-1600 characters (one token per 4 bytes, as vllmsim tokenizes),
// 16-48 output tokens, both uniform.
func UniformWorkload() Workload {
	return Workload{Name: bench.SizesUniform, KVBlocks: 512, Sizes: func(rng *rand.Rand) (int, int) {
		chars := 14 + 400 + rng.IntN(1201)
		return (chars + vllmsim.BytesPerToken - 1) / vllmsim.BytesPerToken, 16 + rng.IntN(33)
	}}
}

// LognormalWorkload is the bench's default -sizes lognormal: prompt and
// output token counts from the lognormals fitted to the Azure 2023 code
// trace (bench.CodePromptTokens, bench.CodeOutputTokens).
func LognormalWorkload() Workload {
	return Workload{Name: bench.SizesLognormal, KVBlocks: 1024, Sizes: func(rng *rand.Rand) (int, int) {
		return bench.CodePromptTokens.Draw(rng), bench.CodeOutputTokens.Draw(rng)
	}}
}

// TraceWorkload replays the trace at path (Azure schema; "" is the bench's
// committed slice) through bench.LoadTrace.
func TraceWorkload(path string) (Workload, error) {
	rows, err := bench.LoadTrace(path)
	if err != nil {
		return Workload{}, err
	}
	if len(rows) < 2 || bench.TraceDuration(rows) <= 0 {
		return Workload{}, fmt.Errorf("trace %q: fewer than 2 requests", path)
	}
	return Workload{Name: "trace", Trace: rows, KVBlocks: 1024}, nil
}

// source yields the jobs of one run in arrival order.
type source struct {
	w      Workload
	rng    *rand.Rand
	rate   float64 // requests/s
	end    time.Duration
	maxLen int // cap on prompt + output tokens
	t      time.Duration
	i      int
	scale  float64 // trace gap multiplier
	fixed  []Job   // explicit jobs (validation against the live bench)
}

func newSource(w Workload, rate float64, end time.Duration, maxLen int, seed uint64) *source {
	s := &source{w: w, rng: rand.New(rand.NewPCG(seed, 0x666c656574)), rate: rate, end: end, maxLen: maxLen}
	if len(w.Trace) > 1 {
		span := bench.TraceDuration(w.Trace)
		traceRate := float64(len(w.Trace)-1) / span.Seconds()
		s.scale = traceRate / rate
		s.i = s.rng.IntN(len(w.Trace)) // start at a seeded place in the trace
	}
	return s
}

// replay makes the source yield exactly jobs, in order, instead of drawing
// its own (the validation runs replay the live bench's sequence). It
// resets the cursor, which a trace workload starts at a seeded row.
func (s *source) replay(jobs []Job) {
	s.fixed = jobs
	s.i = 0
}

// next returns the next job, or false when the run's arrivals are over.
func (s *source) next() (Job, bool) {
	if s.fixed != nil {
		if s.i >= len(s.fixed) {
			return Job{}, false
		}
		s.i++
		return s.fixed[s.i-1], true
	}
	var p, g int
	if s.w.Trace != nil {
		n := len(s.w.Trace)
		cur, nxt := s.w.Trace[s.i%n], s.w.Trace[(s.i+1)%n]
		gap := nxt.At - cur.At
		if gap < 0 { // wrapping around: one mean gap
			gap = bench.TraceDuration(s.w.Trace) / time.Duration(n-1)
		}
		s.t += time.Duration(float64(gap) * s.scale)
		p, g = cur.Prompt, cur.Output
		s.i++
	} else {
		if !s.arrive() {
			return Job{}, false
		}
		p, g = s.w.Sizes(s.rng)
	}
	if s.t >= s.end {
		return Job{}, false
	}
	if p+g > s.maxLen { // as bench.Workload caps sizes: the output goes first
		g = max(s.maxLen-p, 1)
		p = min(p, s.maxLen-g)
	}
	return Job{At: s.t, Prompt: vllmsim.Prompt{Tokens: p}, MaxTokens: g}, true
}

// BenchJobs is the live bench's request sequence for one steady-rate run of
// its replicas scenario at rate for dur with seed (bench.Arrivals and
// bench.Workload.Build with sizes, as bench.Run draws them), as jobs: the
// validation runs replay exactly what the live bench sends.
func BenchJobs(sizes string, rate float64, dur time.Duration, seed int64, blockSize int) []Job {
	w := bench.Workload{Model: vllmsim.DefaultConfig().Model, PromptChars: [2]int{400, 1600}, MaxTokens: [2]int{16, 48}, Sizes: sizes, MaxModelLen: 8192}
	return benchJobs(w, rate, dur, seed, blockSize, false)
}

// benchJobs draws w's requests at rate for dur with seed as bench.Run does
// (bench.Arrivals, then w.Build) and turns them into jobs: a prompt of
// exact size as its token count, any other as its text's block hashes
// (and, withText, the text itself, for routing on prefix hashes).
func benchJobs(w bench.Workload, rate float64, dur time.Duration, seed int64, blockSize int, withText bool) []Job {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x73636864))
	arr := bench.Arrivals([]bench.Segment{{Rate: rate, Dur: dur}}, 1, rng)
	reqs := w.Build(arr, nil, uint64(seed))
	jobs := make([]Job, len(reqs))
	for i, r := range reqs {
		p := vllmsim.Prompt{Tokens: r.PromptTokens}
		if p.Tokens <= 0 {
			p = vllmsim.HashText(blockSize, "", "", r.Prompt)
		}
		jobs[i] = Job{At: r.At, Prompt: p, MaxTokens: r.MaxTokens}
		if withText {
			jobs[i].Text = r.Prompt
		}
	}
	return jobs
}

// PrefixName is the name of PrefixWorkload.
const PrefixName = "prefix"

// PrefixWorkload is the live bench's prefix scenario as a sweep workload
// (-workload prefix): UniformWorkload's pods and output sizes, its jobs
// drawn by PrefixJobs (prompt texts sharing 8 system prompts) for each run,
// so that replicas route on prefix hashes and pods hit their prefix caches.
func PrefixWorkload() Workload {
	w := UniformWorkload()
	w.Name = PrefixName
	return w
}

// PrefixJobs is the live bench's prefix scenario's request sequence for a
// run at rate for dur with seed: 8 shared system prompts of 3,000
// characters, each request one of them plus 200-600 characters of its own,
// 16-48 output tokens (bench.Workload.Build, as bench.Run draws it), with
// each prompt's text, so that replicas route on prefix hashes and pods
// hit their prefix caches.
func PrefixJobs(rate float64, dur time.Duration, seed int64, blockSize int) []Job {
	w := bench.Workload{Model: vllmsim.DefaultConfig().Model, PromptChars: [2]int{200, 600}, MaxTokens: [2]int{16, 48},
		Sizes: bench.SizesUniform, MaxModelLen: 8192, SystemPrompt: 8, SystemChars: 3000}
	return benchJobs(w, rate, dur, seed, blockSize, true)
}

// DrawJobs returns the jobs w's source draws at rate for dur with seed (as
// a run without Config.Jobs would route them): a history for Config.History.
func DrawJobs(w Workload, rate float64, dur time.Duration, seed uint64) []Job {
	s := newSource(w, rate, dur, BenchMaxModelLen, seed)
	var out []Job
	for j, ok := s.next(); ok; j, ok = s.next() {
		out = append(out, j)
	}
	return out
}
