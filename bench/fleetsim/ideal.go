package fleetsim

import (
	"context"
	"time"

	"github.com/probegate/probegate/internal/vllmsim"
	"github.com/probegate/probegate/probe"
	"github.com/probegate/probegate/route"
)

// Ideal strategies, for analysis only (not production policies): they read
// every pod's engine directly, as no real router can.
//   - oracle_ttft: the pod with the least expected time to first token by
//     token count: (true prefill tokens still to compute there, waiting and
//     running, + this prompt) x the pod's true time per prefill token.
//   - oracle_sim: the pod where this request's first token would come
//     soonest if nothing else arrived: each pod's engine is run forward
//     (Whatif) with the request appended. The best greedy choice with
//     perfect knowledge of the present and none of the future.
const (
	OracleTTFT = "oracle_ttft"
	OracleSim  = "oracle_sim"
)

// isIdeal reports whether s is one of the ideal strategies.
func isIdeal(s string) bool { return s == OracleTTFT || s == OracleSim }

// idealPicker is the Picker of the ideal strategies.
type idealPicker struct {
	s    *sim
	r    *replica
	kind string
}

// Pick implements route.Picker.
func (p *idealPicker) Pick(_ context.Context, info *route.RequestInfo, _ []*route.Backend, _ *route.Scratch) (*route.Backend, route.Decision, error) {
	best, bestT := -1, time.Duration(0)
	for i, pd := range p.s.pods {
		var t time.Duration
		if p.kind == OracleTTFT {
			t = pd.prefillAhead(info.PromptTokens)
		} else {
			t = pd.whatif(p.s.now, info.PromptTokens, max(info.MaxTokens, 1))
		}
		if best < 0 || t < bestT || (t == bestT && p.r.rng.IntN(2) == 0) {
			best, bestT = i, t
		}
	}
	return p.r.backends[best], route.Decision{Source: probe.SourceOracle}, nil
}

// prefillAhead is the time to compute the prefill still queued on p (every
// waiting and running request's prompt tokens not yet computed) plus a
// prompt of own tokens, at p's speed.
func (p *pod) prefillAhead(own int) time.Duration {
	c := p.eng.Config()
	return time.Duration(float64(p.aheadTokens()+own) * float64(c.PrefillPerToken) * p.eng.Slowdown())
}

// aheadTokens are the prefill tokens still to compute on p: every waiting
// and running request's prompt tokens not yet computed.
func (p *pod) aheadTokens() int {
	ahead := 0
	p.eng.Each(func(w vllmsim.ReqWork) {
		prompt := w.Tokens - w.Output
		ahead += max(prompt-w.Computed, 0)
	})
	return ahead
}

// wreq is one request in a Whatif run.
type wreq struct {
	prompt, tokens, computed, output, target, n int
	running, done, own                          bool
}

// whatif returns the time from now to the first token of a request of
// prompt tokens and out output tokens sent to p now, if nothing else
// arrived: p's engine scheduling (vLLM V1's, as vllmsim.Engine: running
// first, then waiting FCFS while the token budget and batch seats last)
// replayed forward from its true state. KV-cache limits and prefix hits
// are ignored (the trace has no shared prefixes; its fleet's cache holds
// the largest prompt twice).
func (p *pod) whatif(now time.Duration, prompt, out int) time.Duration {
	c := p.eng.Config()
	rs := p.wbuf[:0]
	p.eng.Each(func(w vllmsim.ReqWork) {
		rs = append(rs, wreq{prompt: w.Tokens - w.Output, tokens: w.Tokens, computed: w.Computed, output: w.Output, target: w.Target, running: w.Running})
	})
	rs = append(rs, wreq{prompt: prompt, tokens: prompt, target: out, own: true})
	p.wbuf = rs
	t := max(p.eng.Now(), now)
	for range 1 << 20 {
		budget := c.MaxNumBatchedTokens
		nrun := 0
		for i := range rs {
			r := &rs[i]
			r.n = 0
			if r.done || !r.running {
				continue
			}
			nrun++
			if budget > 0 {
				r.n = min(r.tokens-r.computed, budget)
				budget -= r.n
			}
		}
		for i := range rs {
			r := &rs[i]
			if budget <= 0 || nrun >= c.MaxNumSeqs {
				break
			}
			if r.done || r.running {
				continue
			}
			r.running = true
			nrun++
			r.n = min(r.tokens-r.computed, budget)
			budget -= r.n
		}
		prefill, decodes, ctx := 0, 0, 0
		for i := range rs {
			r := &rs[i]
			if r.n == 0 {
				continue
			}
			if r.n == 1 && r.computed >= r.prompt {
				decodes++
				ctx += r.computed
			} else {
				prefill += r.n
			}
		}
		t += p.eng.StepDuration(prefill, decodes, ctx, 0)
		for i := range rs {
			r := &rs[i]
			if r.n == 0 {
				continue
			}
			r.computed += r.n
			if r.computed < r.tokens {
				continue
			}
			r.output++
			r.tokens++
			if r.own {
				return t - now
			}
			if r.output >= r.target {
				r.done = true
			}
		}
	}
	return time.Hour
}

// Snapshot is the state of one pod when a request arrived, for Record.
type Snapshot struct {
	Running, Waiting int
	// AheadTokens are the prefill tokens still to compute there.
	AheadTokens int
	// Whatif is the request's TTFT had it been sent there (pod.whatif).
	Whatif time.Duration
	// ViewQueue is the queue the arriving request's replica saw in its
	// cache for the pod (probe.State's view), before any probe.
	ViewQueue float64
	// ViewNs is the replica's learned ns per prefill token for the pod;
	// ViewPodNs the pod-reported one (probe.View.PodNsPerToken).
	ViewNs, ViewPodNs float64
	// ViewSamples is the replica's own speed samples of the pod
	// (probe.View.SpeedSamples); ViewSeeded tells that the pod-reported
	// speed was seeded from the pod's lifetime counters.
	ViewSamples int
	ViewSeeded  bool
	// ViewForeign is the replica's foreign share of the pod
	// (probe.View.ForeignShare).
	ViewForeign float64
	// ViewPrefill is the prompt tokens the replica counts as pending at
	// the pod (probe.View.PrefillTokens: its own requests', and with
	// _sharetokens every replica's).
	ViewPrefill float64
	// Cached is how many of the request's prompt tokens the pod's prefix
	// cache held.
	Cached int
}

// Record is one measured request, given to Config.Record when it finishes.
type Record struct {
	At           time.Duration
	Prompt, Out  int
	Replica, Pod int
	TTFT         time.Duration
	Pods         []Snapshot // at arrival, one per pod
}

// snapshot fills r.snap with every pod's state now, seen by r's replica.
func (s *sim) snapshot(r *request) {
	rep := s.replicas[r.replica]
	now := rep.clock.now()
	r.snap = make([]Snapshot, len(s.pods))
	for i, p := range s.pods {
		sn := &r.snap[i]
		sn.Running, sn.Waiting = p.running, p.waiting
		sn.AheadTokens = p.aheadTokens()
		sn.Cached = p.eng.CachedTokens(r.job.Prompt)
		sn.Whatif = p.whatif(s.now, r.job.Prompt.Tokens-sn.Cached, max(r.job.MaxTokens, 1))
		v := rep.backends[i].State().View(now, 2*time.Second)
		sn.ViewQueue, sn.ViewNs, sn.ViewPodNs, sn.ViewPrefill = v.Queue, v.NsPerToken, v.PodNsPerToken, v.PrefillTokens
		sn.ViewSamples, sn.ViewSeeded, sn.ViewForeign = v.SpeedSamples, v.PodSeeded, v.ForeignShare
	}
}
