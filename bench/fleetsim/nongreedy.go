package fleetsim

import (
	"context"
	"time"

	"github.com/probegate/probegate/probe"
	"github.com/probegate/probegate/route"
)

// Online ideal strategies that replay each pod exactly (AssignFleet, the
// offline bound's evaluator) and need not be greedy, for analysis only:
// they read the whole present (every request sent to every pod so far) and
// nothing of the future. For each pod p they replay p's requests so far
// with the new one appended, which gives own(p), the new request's TTFT
// there, exactly (oracle_sim's whatif ignores KV-cache limits), and every
// earlier request's projected TTFT.
//   - oracle_replay: least own(p): the exact greedy choice (oracle_sim's rule).
//   - oracle_size: as oracle_replay, but a prompt of at least
//     IdealParams.SizeTokens goes to a slow pod only if its own there is
//     under IdealParams.SizeMargin x the best own on a normal pod.
//   - oracle_look: least own(p) + IdealParams.Beta x the time p takes to
//     prefill the prompt: the delay the request imposes on the next one sent
//     to p (it counts twice on a 2x slow pod).
//   - oracle_tail: least max(own(p), the worst projected TTFT of p's
//     requests still waiting for their first token), ties by own(p).
//   - oracle_triage: as oracle_replay, unless the best own is over
//     IdealParams.Lost: the request is lost to the tail anyway, so it goes
//     where it costs the others least, the pod whose queue ends last (the
//     one later requests will avoid).
//   - oracle_pack: oracle_triage for large prompts only (at least
//     IdealParams.SizeTokens): in a burst a large prompt that is late
//     anyway joins the pod whose queue ends last, leaving the others to
//     the small prompts behind it (what the offline search's assignments
//     do: the requests they leave over the target are large prompts).
//
// Prefix caches are ignored (the trace shares no prefixes). Each pick
// replays every pod's whole history: a run costs O(requests^2) steps, fine
// for the 20 s trace windows, slow for long runs.
const (
	OracleReplay = "oracle_replay"
	OracleSize   = "oracle_size"
	OracleLook   = "oracle_look"
	OracleTail   = "oracle_tail"
	OracleTriage = "oracle_triage"
	OraclePack   = "oracle_pack"
)

// IdealParams are the parameters of the non-greedy ideal strategies (zero
// fields: the defaults, DefaultIdealParams).
type IdealParams struct {
	SizeTokens int
	SizeMargin float64
	Beta       float64
	Lost       time.Duration
}

// DefaultIdealParams are the values chosen on windows 1-15 of the
// calibrated code-trace replay (bench/results/2026-12-01-s5-bounds): Beta
// the best of 0.25..4; SizeTokens 4000 and above, at any margin 0.5..0.9,
// and Lost 8 s and above change no decision there (smaller values were
// worse).
func DefaultIdealParams() IdealParams {
	return IdealParams{SizeTokens: 4000, SizeMargin: 0.7, Beta: 0.5, Lost: 8 * time.Second}
}

func (p IdealParams) withDefaults() IdealParams {
	d := DefaultIdealParams()
	if p.SizeTokens == 0 {
		p.SizeTokens = d.SizeTokens
	}
	if p.SizeMargin == 0 {
		p.SizeMargin = d.SizeMargin
	}
	if p.Beta == 0 {
		p.Beta = d.Beta
	}
	if p.Lost == 0 {
		p.Lost = d.Lost
	}
	return p
}

// isReplay reports whether s is one of the replaying ideal strategies.
func isReplay(s string) bool {
	switch s {
	case OracleReplay, OracleSize, OracleLook, OracleTail, OracleTriage, OraclePack:
		return true
	}
	return false
}

// replayState is what the replaying strategies know: every request sent to
// each pod so far. One per run, shared by its replicas (an oracle sees the
// whole fleet).
type replayState struct {
	f     AssignFleet
	hist  [][]Job
	idx   []int
	ttft  []time.Duration
	slow  []bool
	param IdealParams
}

func newReplayState(cfg Config) *replayState {
	st := &replayState{f: NewAssignFleet(cfg), hist: make([][]Job, cfg.Pods), param: cfg.Ideal.withDefaults()}
	minS := st.f.Slowdown[0]
	for _, s := range st.f.Slowdown {
		minS = min(minS, s)
	}
	for _, s := range st.f.Slowdown {
		st.slow = append(st.slow, s > minS)
	}
	return st
}

// podView replays pod p's requests with j appended and returns j's TTFT
// there and the worst projected TTFT of p's requests still waiting, at now,
// for their first token.
func (st *replayState) podView(p int, j Job, now time.Duration) (own, worst time.Duration) {
	h := append(st.hist[p], j)
	st.hist[p] = h[:len(h)-1]
	st.idx = st.idx[:0]
	for i := range h {
		st.idx = append(st.idx, i)
	}
	st.ttft = append(st.ttft[:0], make([]time.Duration, len(h))...)
	if err := st.f.PodTTFTs(p, h, st.idx, st.ttft); err != nil {
		return time.Hour, time.Hour
	}
	for i := range len(h) - 1 {
		if h[i].At+st.ttft[i] > now {
			worst = max(worst, st.ttft[i])
		}
	}
	return st.ttft[len(h)-1], worst
}

// replayPicker is the Picker of the replaying strategies.
type replayPicker struct {
	s    *sim
	r    *replica
	kind string
}

// Pick implements route.Picker.
func (p *replayPicker) Pick(_ context.Context, info *route.RequestInfo, _ []*route.Backend, _ *route.Scratch) (*route.Backend, route.Decision, error) {
	st := p.s.replay
	j := Job{At: p.s.now, MaxTokens: max(info.MaxTokens, 1)}
	j.Prompt.Tokens = info.PromptTokens
	c := st.f.Sim
	n := len(st.hist)
	own := make([]time.Duration, n)
	worst := make([]time.Duration, n)
	bestOwn, bestFast := time.Duration(-1), time.Duration(-1)
	for i := range n {
		own[i], worst[i] = st.podView(i, j, p.s.now)
		if bestOwn < 0 || own[i] < bestOwn {
			bestOwn = own[i]
		}
		if !st.slow[i] && (bestFast < 0 || own[i] < bestFast) {
			bestFast = own[i]
		}
	}
	pr := st.param
	best, bestC := -1, 0.0
	for i := range n {
		c1 := float64(own[i])
		switch p.kind {
		case OracleSize:
			if st.slow[i] && j.Prompt.Tokens >= pr.SizeTokens && bestFast >= 0 && float64(own[i]) >= pr.SizeMargin*float64(bestFast) {
				continue
			}
		case OracleLook:
			svc := float64(c.StepBase+time.Duration(j.Prompt.Tokens)*c.PrefillPerToken) * st.f.Slowdown[i]
			c1 += pr.Beta * svc
		case OracleTail:
			// Ties of the max broken by own: own/2^20 never changes
			// the order of maxima further apart than that.
			c1 = float64(max(own[i], worst[i])) + float64(own[i])/(1<<20)
		case OracleTriage, OraclePack:
			if bestOwn > pr.Lost && (p.kind == OracleTriage || j.Prompt.Tokens >= pr.SizeTokens) {
				c1 = -c1 // the pod whose queue ends last
			}
		}
		if best < 0 || c1 < bestC {
			best, bestC = i, c1
		}
	}
	st.hist[best] = append(st.hist[best], j)
	return p.r.backends[best], route.Decision{Source: probe.SourceOracle}, nil
}
