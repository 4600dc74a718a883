package bench

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Req is one request of a run's sequence: when to send it and what to send.
// Every strategy of a scenario replays the same []Req.
type Req struct {
	At        time.Duration // scheduled send time, from the start of the run
	Model     string        // base model or a LoRA adapter
	Prompt    string
	MaxTokens int // exact output length (the request sets ignore_eos)
	// PromptTokens is the prompt's length in the simulator's tokenization
	// when the workload draws sizes in tokens (0 for uniform sizes).
	PromptTokens int
	Direct       int // >= 0: sent straight to server Direct, bypassing the proxies
	Replica      int // which proxy replica receives it
	Step         int // ramp step (0 elsewhere)
	// ID, when set, is sent as the request's X-Request-Id (Setup.Records).
	ID string
}

// Workload describes how requests are drawn.
type Workload struct {
	Model        string
	PromptChars  [2]int // user prompt length, uniform in [lo, hi]
	MaxTokens    [2]int // output length, uniform in [lo, hi]
	Adapters     []string
	ZipfS        float64 // adapter popularity skew (0: uniform)
	SystemPrompt int     // >0: number of shared system prompts
	SystemChars  int     // length of each shared system prompt
	DirectShare  float64 // share of requests sent straight to a server
	Servers      int
	Replicas     int
	// Sizes is how prompt and output lengths are drawn (SizesUniform or ""
	// uses PromptChars and MaxTokens; SizesLognormal, SizesTrace and
	// SizesBimodal draw token counts, the prompt then has exactly that many
	// tokens).
	Sizes string
	// Pairs are the (prompt, output) rows SizesTrace draws from.
	Pairs []TraceRow
	// MaxModelLen, if > 0, caps prompt + output tokens (the simulator
	// rejects longer requests); the output is shortened first.
	MaxModelLen int
}

// drawTokens returns a prompt and an output length in tokens for the
// token-based size distributions.
func (w *Workload) drawTokens(rng *rand.Rand) (prompt, output int) {
	switch {
	case w.Sizes == SizesTrace && len(w.Pairs) > 0:
		r := w.Pairs[rng.IntN(len(w.Pairs))]
		prompt, output = r.Prompt, r.Output
	case w.Sizes == SizesBimodal:
		prompt, output = ChatDocBimodal.Draw(rng)
	default:
		prompt, output = CodePromptTokens.Draw(rng), CodeOutputTokens.Draw(rng)
	}
	if w.MaxModelLen > 0 && prompt+output > w.MaxModelLen {
		output = max(w.MaxModelLen-prompt, 1)
		prompt = min(prompt, w.MaxModelLen-output)
	}
	return prompt, output
}

// words for prompts: fixed, so a seed fixes the bytes.
var promptWords = strings.Fields("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu")

func randText(rng *rand.Rand, n int) string {
	var b strings.Builder
	b.Grow(n + 16)
	for b.Len() < n {
		b.WriteString(promptWords[rng.IntN(len(promptWords))])
		b.WriteByte(' ')
	}
	return b.String()[:n]
}

func uniform(rng *rand.Rand, r [2]int) int {
	if r[1] <= r[0] {
		return r[0]
	}
	return r[0] + rng.IntN(r[1]-r[0]+1)
}

// Build draws one request per arrival. steps maps arrival index to a ramp
// step (nil: all 0). The result depends only on the arguments and seed.
func (w Workload) Build(arrivals []time.Duration, steps []int, seed uint64) []Req {
	rng := rand.New(rand.NewPCG(seed, 0x626e6368))
	var systems []string
	for i := 0; i < w.SystemPrompt; i++ {
		systems = append(systems, fmt.Sprintf("System prompt %d. You are a helpful assistant. ", i)+randText(rng, w.SystemChars))
	}
	var zipf *rand.Zipf
	if len(w.Adapters) > 1 && w.ZipfS > 1 {
		zipf = rand.NewZipf(rng, w.ZipfS, 1, uint64(len(w.Adapters)-1))
	}
	replicas := max(w.Replicas, 1)
	out := make([]Req, len(arrivals))
	for i, at := range arrivals {
		r := Req{At: at, Model: w.Model, Direct: -1, Replica: i % replicas}
		if steps != nil {
			r.Step = steps[i]
		}
		if len(w.Adapters) > 0 {
			if zipf != nil {
				r.Model = w.Adapters[zipf.Uint64()]
			} else {
				r.Model = w.Adapters[rng.IntN(len(w.Adapters))]
			}
		}
		var user string
		if w.Sizes == SizesLognormal || w.Sizes == SizesTrace || w.Sizes == SizesBimodal {
			r.PromptTokens, r.MaxTokens = w.drawTokens(rng)
			user = tokenText(rng, i, r.PromptTokens)
		} else {
			user = "Request " + strconv.Itoa(i) + ": " + randText(rng, uniform(rng, w.PromptChars))
			r.MaxTokens = uniform(rng, w.MaxTokens)
		}
		if len(systems) > 0 {
			r.Prompt = systems[rng.IntN(len(systems))] + "\nUser: " + user
			r.PromptTokens = 0 // no longer exact
		} else {
			r.Prompt = user
		}
		if w.DirectShare > 0 && rng.Float64() < w.DirectShare && w.Servers > 0 {
			r.Direct = rng.IntN(w.Servers)
		}
		out[i] = r
	}
	return out
}

// TraceRequests turns trace rows into the request sequence of a replay:
// row i is sent at its (already rebased and scaled) arrival time to replica
// i mod replicas, with a prompt of exactly Prompt tokens (unique text, drawn
// from seed) and max_tokens = Output (the client sets ignore_eos).
func TraceRequests(rows []TraceRow, model string, replicas int, seed uint64) []Req {
	rng := rand.New(rand.NewPCG(seed, 0x74726163))
	replicas = max(replicas, 1)
	out := make([]Req, len(rows))
	for i, row := range rows {
		out[i] = Req{At: row.At, Model: model, Prompt: tokenText(rng, i, row.Prompt), PromptTokens: row.Prompt,
			MaxTokens: row.Output, Direct: -1, Replica: i % replicas}
	}
	return out
}
