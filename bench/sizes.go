package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/probegate/probegate/internal/vllmsim"
)

// Size distributions of -sizes: how the steady, spike and replicas
// scenarios (and the capacity measurement before them) draw prompt and
// output lengths.
const (
	// SizesUniform: prompts of Workload.PromptChars characters (100-400
	// tokens) and outputs of Workload.MaxTokens tokens (16-48), uniform.
	SizesUniform = "uniform"
	// SizesLognormal: prompt and output token counts drawn independently
	// from lognormals fitted to the Azure 2023 code trace (the default).
	SizesLognormal = "lognormal"
	// SizesTrace: (prompt, output) pairs drawn at random from a trace's
	// rows (-trace FILE, else the committed slice).
	SizesTrace = "trace"
	// SizesBimodal: ChatDocBimodal, 80% chat turns with long outputs and
	// 20% long documents with short ones (fleetsim -general's "bimodal").
	SizesBimodal = "bimodal"
)

// SizeKinds lists the accepted -sizes values.
var SizeKinds = []string{SizesLognormal, SizesUniform, SizesTrace, SizesBimodal}

// Bimodal is a two-mode size distribution: with probability ChatShare a
// chat turn (prompt and output uniform in ChatPrompt and ChatOutput,
// inclusive), else a document (DocPrompt, DocOutput).
type Bimodal struct {
	ChatShare              float64
	ChatPrompt, ChatOutput [2]int
	DocPrompt, DocOutput   [2]int
}

// ChatDocBimodal is the bimodal workload of fleetsim -general (session 11),
// the only traffic in which the simulator saw probe lose to a blind policy:
// 80% chat turns of 64-512 prompt and 32-256 output tokens, 20% documents
// of 3,000-7,000 prompt and 8-64 output tokens. The parameters are
// assumptions chosen to contrast the two modes (a chat turn holds a batch
// seat for up to 256 decode steps; a document's prefill is 6-100x a chat
// turn's), not fitted to a trace: the only trace at hand is the Azure code
// service's, whose outputs are short (median 13 tokens).
var ChatDocBimodal = Bimodal{ChatShare: 0.8, ChatPrompt: [2]int{64, 512}, ChatOutput: [2]int{32, 256},
	DocPrompt: [2]int{3000, 7000}, DocOutput: [2]int{8, 64}}

// Draw returns one request's prompt and output tokens. It draws from rng in
// a fixed order (the mode, then the prompt, then the output), so one rng
// state gives fleetsim and the bench the same request.
func (b Bimodal) Draw(rng *rand.Rand) (prompt, output int) {
	if rng.Float64() < b.ChatShare {
		return uniform(rng, b.ChatPrompt), uniform(rng, b.ChatOutput)
	}
	return uniform(rng, b.DocPrompt), uniform(rng, b.DocOutput)
}

// LogNormal is a lognormal distribution of token counts, clamped to
// [Min, Max]: exp(Mu + Sigma*N(0,1)), rounded.
type LogNormal struct {
	Mu, Sigma float64
	Min, Max  int
}

// Draw returns one token count.
func (l LogNormal) Draw(rng *rand.Rand) int {
	n := int(math.Round(math.Exp(l.Mu + l.Sigma*rng.NormFloat64())))
	return min(max(n, l.Min), l.Max)
}

// The lognormal fit to the Azure LLM inference trace 2023, code service
// (8,819 rows; CC-BY 4.0, Patel et al., "Splitwise", ISCA 2024), by
// quantiles: Mu = ln(median), Sigma = (ln(p90) - ln(median)) / 1.2816, so
// the body of the distribution (median and p90) matches the trace's; Min
// and Max are the trace's own. (Maximum likelihood on ln(tokens) gives Mu
// 7.00 and Sigma 1.36 for prompts, a median of 1,096 tokens against the
// trace's 1,469: the trace's log-sizes are skewed by a tail of tiny
// prompts, which the quantile fit ignores.) bench/README.md ("Request
// sizes") compares the fit with the trace.
var (
	// CodePromptTokens: median 1,469, p90 5,194 tokens.
	CodePromptTokens = LogNormal{Mu: 7.2923, Sigma: 0.9854, Min: 3, Max: 7437}
	// CodeOutputTokens: median 13, p90 55 tokens.
	CodeOutputTokens = LogNormal{Mu: 2.5649, Sigma: 1.1255, Min: 6, Max: 1899}
)

// tokenText returns a prompt of exactly tokens tokens in the simulator's
// tokenization (vllmsim.BytesPerToken bytes each, ASCII): "Request i: "
// then words drawn from rng, cut to length. The request number makes every
// prompt's first block unique, so no two requests share a prefix by
// accident.
func tokenText(rng *rand.Rand, i, tokens int) string {
	n := tokens * vllmsim.BytesPerToken
	head := "Request " + strconv.Itoa(i) + ": "
	if len(head) >= n {
		return head[:n]
	}
	var b strings.Builder
	b.Grow(n + 16)
	b.WriteString(head)
	for b.Len() < n {
		b.WriteString(promptWords[rng.IntN(len(promptWords))])
		b.WriteByte(' ')
	}
	return b.String()[:n]
}

// checkSizes validates a -sizes value.
func checkSizes(s string) error {
	for _, k := range SizeKinds {
		if s == k {
			return nil
		}
	}
	return fmt.Errorf("unknown -sizes %q (have %s)", s, strings.Join(SizeKinds, ", "))
}
