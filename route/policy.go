package route

import (
	"context"
	"fmt"
	"time"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/probe"
)

// policy names route.policy values.
type policy uint8

// Routing policies. policyOracle is not accepted from config.yaml: the
// benchmark enables it through Options.Oracle.
const (
	policyProbe policy = iota
	policyCached
	policyLeastInflight
	policyRoundRobin
	policyRandom
	policyOracle
)

func parsePolicy(s string) (policy, error) {
	switch s {
	case "probe", "":
		return policyProbe, nil
	case "cached":
		return policyCached, nil
	case "least_inflight":
		return policyLeastInflight, nil
	case "round_robin":
		return policyRoundRobin, nil
	case "random":
		return policyRandom, nil
	case "oracle":
		return policyOracle, nil
	}
	return 0, fmt.Errorf("route.policy: unknown policy %q", s)
}

// usesReports reports whether the policy reads load reports (and so needs
// the scraper and ORCA).
func (p policy) usesReports() bool { return p == policyProbe || p == policyCached }

// decision is what the router decided for one attempt, for metrics and logs.
type decision struct {
	source probe.Source
	age    time.Duration
}

// loraWindow is how long a dispatch of an adapter to a backend counts as
// "loaded there" without a report saying so.
const loraWindow = 10 * time.Second

// pick chooses a backend for one attempt, never choosing one in exclude.
// It returns ErrNoBackend when nothing is eligible and ErrSaturated when
// shedding is on and every candidate is known to be saturated.
func (p *Proxy) pick(ctx context.Context, rc *reqCtx, rt *runtime, pool *Pool, exclude []*Backend) (*Backend, decision, error) {
	var dec decision
	bs := pool.backends
	if len(bs) == 0 {
		return nil, dec, ErrNoBackend
	}
	switch rt.policy {
	case policyRoundRobin:
		n := uint64(len(bs))
		start := p.rr.Add(1)
		for i := uint64(0); i < n; i++ {
			b := bs[(start+i)%n]
			if b.Eligible() && !contains(exclude, b) {
				dec.source = probe.SourceNone
				return b, dec, nil
			}
		}
		return nil, dec, ErrNoBackend
	case policyRandom:
		if sampleEligible(bs, rc.sample[:1], exclude, p.rand) == 0 {
			return nil, dec, ErrNoBackend
		}
		return rc.sample[0], dec, nil
	case policyLeastInflight:
		k := sampleEligible(bs, rc.sample[:rt.d], exclude, p.rand)
		if k == 0 {
			return nil, dec, ErrNoBackend
		}
		rc.cands = rc.cands[:0]
		for i := 0; i < k; i++ {
			rc.cands = append(rc.cands, Candidate{Index: i, Queue: float64(rc.sample[i].state.Inflight())})
		}
		i := PickLeast(rc.cands, p.rand())
		dec.source = probe.SourceLocal
		return rc.sample[rc.cands[i].Index], dec, nil
	case policyCached, policyOracle:
		// Score every eligible backend, as EPP does (and as the oracle's
		// "best of all servers" requires).
		rc.all = rc.all[:0]
		for _, b := range bs {
			if b.Eligible() && !contains(exclude, b) {
				rc.all = append(rc.all, b)
			}
		}
		if len(rc.all) == 0 {
			return nil, dec, ErrNoBackend
		}
		return p.score(rc, rt, rc.all, &dec)
	default: // policyProbe
		// Candidates, in order: the affinity backend (prefix or LoRA), the
		// backend that looks best in the cache (power-of-d with memory),
		// then uniform random samples up to d. The probe verifies them all.
		d := rt.d
		k := 0
		excl := append(rc.excl[:0], exclude...)
		if a := p.affine(rc, rt, bs, exclude); a != nil {
			rc.sample[k] = a
			k++
			excl = append(excl, a)
		}
		// The memory slot never takes the last random place: one uniform
		// sample always remains, so a stale prior cannot lock out a backend.
		if k < d-1 {
			if m := p.bestCached(rc, rt, bs, excl); m != nil {
				rc.sample[k] = m
				k++
				excl = append(excl, m)
			}
		}
		exclude = excl
		k += sampleEligible(bs, rc.sample[k:d], exclude, p.rand)
		if k == 0 {
			return nil, dec, ErrNoBackend
		}
		cands := rc.sample[:k]
		spares := rc.spare[:0]
		if rt.prober != nil && rt.hedges > 0 && len(bs) > k {
			rc.excl = append(rc.excl[:0], exclude...)
			rc.excl = append(rc.excl, cands...)
			n := sampleEligible(bs, rc.spare[:rt.hedges], rc.excl, p.rand)
			spares = rc.spare[:n]
		}
		rc.states = rc.states[:0]
		for _, b := range cands {
			rc.states = append(rc.states, b.state)
		}
		rc.spareStates = rc.spareStates[:0]
		for _, b := range spares {
			rc.spareStates = append(rc.spareStates, b.state)
		}
		if rt.prober != nil {
			res := rt.prober.Run(ctx, rc.states, rc.spareStates)
			// Hedged backends are candidates too: their fresh answers
			// may make them the best choice.
			for _, b := range spares[:res.SparesUsed] {
				rc.sample[k] = b
				k++
			}
		}
		return p.score(rc, rt, rc.sample[:k], &dec)
	}
}

// affine returns one backend to add to the probe policy's random sample so
// that affinity survives sampling: the eligible backend with the longest
// prefix match for this request (at least one block), else one that this
// proxy recently sent the same model to (a LoRA adapter is likely still
// loaded there), scanning from a random offset; or nil. The probe then
// decides whether that backend is too loaded to use.
func (p *Proxy) affine(rc *reqCtx, rt *runtime, bs []*Backend, exclude []*Backend) *Backend {
	var best *Backend
	if rt.weights.Prefix > 0 && rc.info.NBlocks > 0 {
		blocks := rc.info.Blocks[:rc.info.NBlocks]
		bestN := 0
		for _, b := range bs {
			if n := b.prefix.Match(blocks); n > bestN && b.Eligible() && !contains(exclude, b) {
				best, bestN = b, n
			}
		}
		if best != nil {
			return best
		}
	}
	if rt.weights.LoRA > 0 && rc.info.ModelHash != 0 && len(bs) > 0 {
		// Only requests for an adapter: base-model requests have no slot to
		// find, and every backend serving them would look "loaded".
		now := p.now()
		adapter := p.adapters.Has(rc.info.ModelHash)
		for _, b := range bs {
			if adapter {
				break
			}
			if l := b.state.Latest(); l != nil && l.BaseModel != "" {
				adapter = string(rc.info.Model) != l.BaseModel
				break
			}
		}
		if !adapter {
			return nil
		}
		// Loaded first, then a free adapter slot, scanning from a random
		// offset so ties spread.
		start := int(p.rand() % uint64(len(bs)))
		var free *Backend
		for i := range bs {
			b := bs[(start+i)%len(bs)]
			if !b.Eligible() || contains(exclude, b) {
				continue
			}
			v := b.state.View(now, rt.staleAfter)
			switch s := loraScore(rc.info.ModelHash, true, &v, &b.lora, now, loraWindow); {
			case s >= 1:
				return b
			case s > 0 && free == nil:
				free = b
			}
		}
		return free
	}
	return nil
}

// memoryScan bounds how many backends bestCached reads: all of them in
// fleets up to this size, a random sample of this many in larger ones.
const memoryScan = 16

// bestCached returns the eligible backend (not in exclude) that looks best
// in the cache: the lowest corrected queue, then the lowest KV use, over
// every backend of a small pool or memoryScan sampled ones. It is the
// "memory" of power-of-d-choices with memory (Mitzenmacher, Prabhakar and
// Shah): one slot of the sample goes to the best-known backend, so
// knowledge gathered by earlier probes, scrapes and ORCA headers is not
// thrown away, while the random slots keep a stale prior from herding
// every decision onto one backend; the probe then checks the prior. It
// returns nil when nothing is eligible.
func (p *Proxy) bestCached(rc *reqCtx, rt *runtime, bs []*Backend, exclude []*Backend) *Backend {
	scan := rc.memo[:0]
	if len(bs) <= memoryScan {
		for _, b := range bs {
			if b.Eligible() && !contains(exclude, b) {
				scan = append(scan, b)
			}
		}
	} else {
		scan = scan[:sampleEligible(bs, rc.memo[:memoryScan], exclude, p.rand)]
	}
	if len(scan) == 0 {
		return nil
	}
	now := p.now()
	cands := rc.memoCands[:0]
	for i, b := range scan {
		v := b.state.View(now, rt.staleAfter)
		cands = append(cands, Candidate{Index: i, Queue: v.Queue, KVUse: v.KVUse, LoRA: 0.5})
	}
	w := Weights{Queue: rt.weights.Queue, KVCache: rt.weights.KVCache}
	if w.Queue == 0 && w.KVCache == 0 {
		w.Queue = 1
	}
	i, _ := PickBest(cands, &w, p.rand())
	if i < 0 {
		return nil
	}
	return scan[cands[i].Index]
}

// score builds each backend's candidate value from its view and picks the
// best (PickBest). It records the deciding source and state age in dec.
func (p *Proxy) score(rc *reqCtx, rt *runtime, bs []*Backend, dec *decision) (*Backend, decision, error) {
	now := p.now()
	rc.cands = rc.cands[:0]
	adapter := false
	for i, b := range bs {
		var v probe.View
		if rt.policy == policyOracle && p.oracle != nil {
			v = oracleView(p.oracle, b, now)
		} else {
			v = b.state.View(now, rt.staleAfter)
		}
		rc.views = append(rc.views[:i], v)
		if v.MaxLoRA > 0 {
			p.adapters.Learn(&v)
		}
	}
	if rc.info.ModelHash != 0 {
		adapter = p.adapters.Has(rc.info.ModelHash)
	}
	blocks := rc.info.Blocks[:rc.info.NBlocks]
	for i, b := range bs {
		v := &rc.views[i]
		c := Candidate{Index: i, Queue: v.Queue, KVUse: v.KVUse, Known: v.Source != probe.SourceLocal && v.Source != probe.SourceNone}
		if len(blocks) > 0 {
			c.Prefix = float64(b.prefix.Match(blocks)) / float64(len(blocks))
		}
		isAdapter := adapter || (len(rc.info.Model) > 0 && v.BaseModel != "" && string(rc.info.Model) != v.BaseModel)
		c.LoRA = loraScore(rc.info.ModelHash, isAdapter, v, &b.lora, now, loraWindow)
		if c.Known {
			if rt.sat.MaxKVCache > 0 && v.KVUse >= rt.sat.MaxKVCache {
				c.Saturated = true
			}
			if rt.sat.MaxWaiting > 0 && v.Waiting >= rt.sat.MaxWaiting {
				c.Saturated = true
			}
		}
		rc.cands = append(rc.cands, c)
	}
	limitAffinity(rc.cands, float64(rt.affinityGap))
	i, allSat := PickBest(rc.cands, &rt.weights, p.rand())
	if i < 0 {
		return nil, *dec, ErrNoBackend
	}
	if allSat && rt.sat.Shed {
		return nil, *dec, ErrSaturated
	}
	v := &rc.views[rc.cands[i].Index]
	dec.source = v.Source
	dec.age = v.Age
	return bs[rc.cands[i].Index], *dec, nil
}

// oracleView turns the oracle's true state into a view.
func oracleView(o func(addr string) (probe.Load, bool), b *Backend, now time.Time) probe.View {
	l, ok := o(b.addr)
	if !ok {
		return b.state.View(now, 0)
	}
	return probe.View{
		Queue: float64(l.Running + l.Waiting), Waiting: l.Waiting, KVUse: l.KVUse,
		MaxLoRA: l.MaxLoRA, RunningLoRAs: l.RunningLoRAs, WaitingLoRAs: l.WaitingLoRAs,
		Source: probe.SourceOracle, Inflight: b.state.Inflight(),
	}
}

// runtime is the reloadable part of the configuration, resolved once per
// reload into the values the request path needs. Immutable once published.
type runtime struct {
	cfg           *config.Config
	policy        policy
	d             int
	hedges        int
	weights       Weights
	sat           config.Saturation
	affinityGap   int
	prober        *probe.Prober
	probeDeadline time.Duration
	staleAfter    time.Duration
	orca          bool
	retries       int
	blockChars    int
	maxBlocks     int
	maxBody       int64
	idle          time.Duration
	accessLog     bool
}
