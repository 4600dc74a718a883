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
	Direct    int // >= 0: sent straight to server Direct, bypassing the proxies
	Replica   int // which proxy replica receives it
	Step      int // ramp step (0 elsewhere)
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
		user := "Request " + strconv.Itoa(i) + ": " + randText(rng, uniform(rng, w.PromptChars))
		if len(systems) > 0 {
			r.Prompt = systems[rng.IntN(len(systems))] + "\nUser: " + user
		} else {
			r.Prompt = user
		}
		r.MaxTokens = uniform(rng, w.MaxTokens)
		if w.DirectShare > 0 && rng.Float64() < w.DirectShare && w.Servers > 0 {
			r.Direct = rng.IntN(w.Servers)
		}
		out[i] = r
	}
	return out
}
