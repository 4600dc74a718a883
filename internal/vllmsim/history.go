package vllmsim

import (
	"slices"
	"time"
)

// A pod's earlier life: the counters a long-lived vLLM server carries when a
// proxy first scrapes it. A fresh simulator starts every counter at 0, as a
// pod that was just started; real pods behind a proxy that restarts or
// scales out have served for hours, and their /metrics already hold the
// sums of every request they prefilled (vllm:request_prefill_time_seconds,
// vllm:request_prefill_kv_computed_tokens, vllm:prompt_tokens_total...).
// RunHistory plays such a life through a private engine in virtual time;
// Server.SetHistory adds its Stats to what /metrics reports.

// HistoryRequest is one request of a pod's earlier life: arriving At (from
// the start of that life), with its prompt and exact output length
// (ignore_eos).
type HistoryRequest struct {
	At        time.Duration
	Prompt    Prompt
	MaxTokens int
}

// RunHistory replays reqs through a fresh engine for cfg at slowdown (as
// Engine.SetSlowdown), open loop at their arrival times, until every one
// has finished, and returns the engine's Stats: the counters and histograms
// a pod that served them would report. Requests the engine refuses (too
// long for MaxModelLen) are skipped. reqs need not be sorted.
func RunHistory(cfg Config, slowdown float64, reqs []HistoryRequest) (Stats, error) {
	e, err := NewEngine(cfg)
	if err != nil {
		return Stats{}, err
	}
	e.SetSlowdown(slowdown)
	rs := slices.Clone(reqs)
	slices.SortStableFunc(rs, func(a, b HistoryRequest) int { return int(a.At - b.At) })
	i := 0
	for i < len(rs) || !e.Idle() {
		if e.Idle() {
			e.AdvanceTo(rs[i].At)
		}
		for i < len(rs) && rs[i].At <= e.Now() {
			r := &Request{Prompt: rs[i].Prompt, MaxTokens: rs[i].MaxTokens, IgnoreEOS: true}
			_ = e.AddAt(r, rs[i].At) // a refused request is not part of the history
			i++
		}
		e.Step()
	}
	return e.Stats(), nil
}

// add folds h's counters and histograms into s (same bucket sets).
func (s *Stats) add(h *Stats) {
	s.PrefixQueries += h.PrefixQueries
	s.PrefixHits += h.PrefixHits
	s.Preemptions += h.Preemptions
	s.AdapterLoads += h.AdapterLoads
	s.FinishedStop += h.FinishedStop
	s.FinishedLength += h.FinishedLength
	s.FinishedAbort += h.FinishedAbort
	s.PromptTokens += h.PromptTokens
	s.GenerationTokens += h.GenerationTokens
	s.Steps += h.Steps
	for _, p := range []struct{ dst, src *Histogram }{
		{&s.TTFT, &h.TTFT}, {&s.ITL, &h.ITL}, {&s.E2E, &h.E2E}, {&s.QueueTime, &h.QueueTime},
		{&s.PromptLen, &h.PromptLen}, {&s.GenerateLen, &h.GenerateLen},
		{&s.PrefillTime, &h.PrefillTime}, {&s.PrefillComputed, &h.PrefillComputed},
	} {
		p.dst.merge(p.src)
	}
}

// merge adds o's observations to h (o has h's buckets, or none).
func (h *Histogram) merge(o *Histogram) {
	for i := range h.Counts {
		h.Counts[i] += o.Counts[i]
	}
	h.Count += o.Count
	h.Sum += o.Sum
}

// SetHistory makes the server report h (RunHistory's Stats) on top of its
// own counters in /metrics, as a pod that served h before would: only the
// rendered counters and histograms change, not State or the engine. It
// holds until the server restarts (Restart, or Close and Start), which
// resets vLLM's counters.
func (s *Server) SetHistory(h Stats) {
	if g := s.gen.Load(); g != nil {
		g.history.Store(&h)
	}
}

// DealHistory deals reqs over len(weights) pods as a router that knew their
// speeds would have spread them: each request to the pod whose dealt
// requests, each counted weights[i] (its slowdown: 2 for a pod 2x slower,
// <= 1 counted as 1), would be fewest after it (weighted round robin,
// ties to the lowest index). With roundRobin, request j goes to pod
// j mod len(weights) whatever the weights, as a Kubernetes Service
// spreads connections: a slow pod then gets more than its share.
func DealHistory(reqs []HistoryRequest, weights []float64, roundRobin bool) [][]HistoryRequest {
	n := len(weights)
	out := make([][]HistoryRequest, n)
	if n == 0 {
		return out
	}
	w := make([]float64, n)
	for i, x := range weights {
		w[i] = max(x, 1)
	}
	dealt := make([]float64, n)
	for j, r := range reqs {
		i := j % n
		if !roundRobin {
			i = 0
			for k := 1; k < n; k++ {
				if dealt[k]+w[k] < dealt[i]+w[i] {
					i = k
				}
			}
		}
		dealt[i] += w[i]
		out[i] = append(out[i], r)
	}
	return out
}
