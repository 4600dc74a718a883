package route

import (
	"context"
	"time"

	"github.com/probegate/probegate/probe"
)

// loraWindow is how long a dispatch of an adapter to a backend counts as
// "loaded there" without a report saying so.
const loraWindow = 10 * time.Second

// memoryScan bounds how many backends the memory slot reads: all of them in
// fleets up to this size, a random sample of this many in larger ones.
const memoryScan = 16

// probePicker is route.policy probe, the default: power-of-d sampling with
// an affinity slot and a memory slot, a hedged, deadline-bounded probe of
// the sample (Deps.Prober), then the best score on the refreshed views.
type probePicker struct {
	sc     scorer
	prober Prober
}

func newProbePicker(pc *PickerConfig, pool *Pool, d *Deps) Picker {
	return &probePicker{sc: newScorer(pc, pool, d), prober: d.Prober}
}

// Pick implements Picker. Candidates, in order: the LoRA affinity backend,
// the backend that looks best in the cache (power-of-d with memory; the
// backend holding the request's prompt prefix competes for it), then
// uniform random samples up to d; with a Prober, up to Hedges spares for
// hedging. The Prober refreshes them; the best score on the refreshed
// views wins. With d = 1 there is no memory slot: the prefix holder, if
// any, takes the only place.
func (p *probePicker) Pick(ctx context.Context, info *RequestInfo, exclude []*Backend, s *Scratch) (*Backend, Decision, error) {
	bs := p.sc.bs
	if len(bs) == 0 {
		return nil, Decision{}, ErrNoBackend
	}
	d := p.sc.pc.D
	k := 0
	excl := append(s.excl[:0], exclude...)
	// The prefix holder competes for the memory slot, scored as in the
	// final pick (prefix share, route.affinity_max_queue_gap, and in
	// tokens mode the prefill its cached prefix saves), instead of taking
	// a slot whatever its load: a sample of a loaded holder and one random
	// backend is a choice between a hot spot and chance, while the memory
	// slot offers the holder only when it is also among the lightly
	// loaded.
	// One instant for the decisions before the probe (the final score,
	// after it, reads the clock again).
	now := p.sc.now()
	cutoff := now.Add(-p.sc.pc.StaleAfter)
	var holder *Backend
	if p.sc.pc.Weights.Prefix > 0 && info.NBlocks > 0 {
		holder = p.prefixHolder(info, exclude, now, cutoff)
	}
	a := p.affine(info, exclude, now)
	if a == nil && d < 2 {
		a, holder = holder, nil
	}
	if a != nil {
		s.sample[k] = a
		k++
		excl = append(excl, a)
	}
	// The memory slot never takes the last random place: one uniform
	// sample always remains, so a stale prior cannot lock out a backend.
	if k < d-1 {
		if m := p.bestCached(info, s, excl, holder, now, cutoff); m != nil {
			s.sample[k] = m
			k++
			excl = append(excl, m)
		}
	}
	exclude = excl
	k += sampleEligible(bs, &p.sc.modN, s.sample[k:d], exclude, p.sc.rand)
	if k == 0 {
		return nil, Decision{}, ErrNoBackend
	}
	cands := s.sample[:k]
	spares := s.spare[:0]
	if hedges := p.sc.pc.Hedges; p.prober != nil && hedges > 0 && len(bs) > k {
		s.excl = append(s.excl[:0], exclude...)
		s.excl = append(s.excl, cands...)
		n := sampleEligible(bs, &p.sc.modN, s.spare[:hedges], s.excl, p.sc.rand)
		spares = s.spare[:n]
	}
	if p.prober != nil {
		s.states = s.states[:0]
		for _, b := range cands {
			s.states = append(s.states, b.state)
		}
		s.spareStates = s.spareStates[:0]
		for _, b := range spares {
			s.spareStates = append(s.spareStates, b.state)
		}
		res := p.prober.Run(ctx, s.states, s.spareStates)
		// Hedged backends are candidates too: their fresh answers may
		// make them the best choice.
		for _, b := range spares[:res.SparesUsed] {
			s.sample[k] = b
			k++
		}
	}
	return p.sc.best(info, s, s.sample[:k])
}

// affine returns one backend to add to the random sample so that LoRA
// affinity survives sampling: for a request for an adapter, a backend
// that has it loaded or that this router recently sent it to (it is
// likely still loaded there), else one with a free adapter slot; or nil.
// The probe then decides whether that backend is too loaded to use.
//
// A pool of at most memoryScan backends is scanned whole, from a random
// offset so ties spread. A larger pool costs the same whatever its size:
// first the adapter index's holders (backends whose views listed the
// adapter, or that this router sent it to), then memoryScan backends from
// a random offset, whose listed adapters are learned on the way. So a
// backend that loaded the adapter for another router is found once one
// of this router's scans or picks has read its report: the first
// requests for an adapter loaded nowhere this router has looked may load
// it on a free slot elsewhere.
func (p *probePicker) affine(info *RequestInfo, exclude []*Backend, now time.Time) *Backend {
	bs := p.sc.bs
	w := &p.sc.pc.Weights
	if w.LoRA <= 0 || info.ModelHash == 0 || len(bs) == 0 {
		return nil
	}
	// Only requests for an adapter: base-model requests have no slot to
	// find, and every backend serving them would look "loaded". The first
	// report naming a base model decides; at most memoryScan backends are
	// read (from a random offset), so a fleet that reports none costs a
	// bounded scan, not one per backend.
	adapter := p.sc.mem.adapters.Has(info.ModelHash)
	if !adapter {
		j := int(p.sc.modN.mod(p.sc.rand()))
		for range min(len(bs), memoryScan) {
			if l := bs[j].state.Latest(); l != nil && l.BaseModel != "" {
				adapter = string(info.Model) != l.BaseModel
				break
			}
			if j++; j == len(bs) {
				j = 0
			}
		}
	}
	if !adapter {
		return nil
	}
	var v probe.View
	large := len(bs) > memoryScan
	if large {
		if b := p.indexedAdapter(info.ModelHash, exclude, &v, now); b != nil {
			return b
		}
	}
	// Loaded first, then a free adapter slot.
	j := int(p.sc.modN.mod(p.sc.rand())) - 1
	var free *Backend
	for range min(len(bs), memoryScan) {
		if j++; j == len(bs) {
			j = 0
		}
		b := bs[j]
		if !b.Eligible() || contains(exclude, b) {
			continue
		}
		p.sc.view(&v, b, now)
		if large && v.MaxLoRA > 0 {
			p.sc.mem.learnAdapters(&v, b)
		}
		switch s := loraScore(info.ModelHash, true, &v, &b.lora, now, loraWindow); {
		case s >= 1:
			return b
		case s > 0 && free == nil:
			free = b
		}
	}
	return free
}

// indexedAdapter returns a backend the adapter index lists for adapter h
// that is eligible, not excluded and still believed to hold it (its view
// and this router's dispatches, as loraScore judges); or nil. v is scratch.
func (p *probePicker) indexedAdapter(h uint64, exclude []*Backend, v *probe.View, now time.Time) *Backend {
	x := p.sc.mem.loras.Load()
	if x == nil {
		return nil
	}
	var found *Backend
	hs := [1]uint64{h}
	x.Holders(hs[:], func(b *Backend) bool {
		if found != nil || !b.Eligible() || contains(exclude, b) {
			return false
		}
		p.sc.view(v, b, now)
		if loraScore(h, true, v, &b.lora, now, loraWindow) >= 1 {
			found = b
		}
		return true
	})
	return found
}

// prefixHolder returns an eligible backend (not in exclude) with the
// longest prefix match for this request, at least one block; or nil. Among
// backends matching equally long it returns the one with the shortest
// queue in its current view, ties broken at random: a popular prefix ends
// up cached on several backends, and always offering the same one of them
// (the first in pool order, as a plain scan would) piles that prefix's
// traffic onto it up to route.affinity_max_queue_gap while its other
// holders idle.
//
// It asks Memory's prefix index for the backends last sent the request's
// deepest indexed prefix and confirms each with its prefix table, so its
// cost does not grow with the pool: at most 8 index entries, 4 Matches and
// 4 views.
func (p *probePicker) prefixHolder(info *RequestInfo, exclude []*Backend, now, cutoff time.Time) *Backend {
	x := p.sc.mem.prefixIndex()
	if x == nil {
		return nil
	}
	blocks := info.Blocks[:info.NBlocks]
	var best *Backend
	bestN, bestQ, ties := 0, 0.0, 0
	r := p.sc.rand()
	x.Holders(blocks, func(b *Backend) bool {
		if b == best || !b.Eligible() || contains(exclude, b) {
			return b == best
		}
		n := b.prefix.Match(blocks)
		if n == 0 || n < bestN {
			return n > 0
		}
		var v probe.Brief
		p.sc.brief(&v, b, now, cutoff)
		q := v.Queue
		switch {
		case n > bestN || q < bestQ:
			best, bestN, bestQ, ties = b, n, q, 1
		case q == bestQ:
			ties++
			if tieMod(mix64(&r), ties) == 0 {
				best = b
			}
		}
		return true
	})
	return best
}

// bestCached returns the eligible backend (not in exclude) that looks best
// in the cache: the lowest corrected queue, then the lowest KV use, over
// every backend of a small pool or memoryScan sampled ones. It is the
// "memory" of power-of-d-choices with memory (Mitzenmacher, Prabhakar and
// Shah): one slot of the sample goes to the best-known backend, so
// knowledge gathered by earlier probes, scrapes and ORCA headers is not
// thrown away, while the random slots keep a stale prior from herding
// every decision onto one backend; the probe then checks the prior. It
// returns nil when nothing is eligible.
//
// With holder (the request's prefix holder) the slot is prefix-aware:
// holder joins the scan, the prefix scorer and route.affinity_max_queue_gap
// apply as in the final score (and in route.load tokens mode each
// backend's expected time to first token counts only the prompt tokens it
// does not hold cached), so the slot goes to a lightly loaded backend that
// holds the prefix, and to a lightly loaded one without it when the holder
// is busy.
func (p *probePicker) bestCached(info *RequestInfo, s *Scratch, exclude []*Backend, holder *Backend, now, cutoff time.Time) *Backend {
	bs := p.sc.bs
	scan := s.memo[:0]
	if len(bs) <= memoryScan {
		for _, b := range bs {
			if b.Eligible() && !contains(exclude, b) {
				scan = append(scan, b)
			}
		}
	} else {
		scan = scan[:sampleEligible(bs, &p.sc.modN, s.memo[:memoryScan], exclude, p.sc.rand)]
	}
	if holder != nil && !contains(scan, holder) && !contains(exclude, holder) {
		scan = append(scan, holder) // s.memo has room for it
	}
	if len(scan) == 0 {
		return nil
	}
	briefs := s.memoBriefs[:len(scan)]
	for i, b := range scan {
		p.sc.brief(&briefs[i], b, now, cutoff)
	}
	var li LoadInput // requests mode reads the queue alone (and speeds)
	if p.sc.pc.Load.Tokens {
		li = briefLoadInput(p.sc.mem, &p.sc.pc.Load, info, briefs, now)
	} else if p.sc.pc.Load.SpeedBand >= 1 {
		li.RefNs = p.sc.pc.Load.briefRefNs(briefs)
	}
	w := Weights{Queue: p.sc.pc.Weights.Queue, KVCache: p.sc.pc.Weights.KVCache}
	var blocks []uint64
	if holder != nil {
		// Prefix-aware memory slot: a cached prefix shortens the prefill
		// (in the expected time to first token) and scores as in best.
		blocks = info.Blocks[:info.NBlocks]
		w.Prefix = p.sc.pc.Weights.Prefix
	}
	cands := s.memoCands[:len(scan)]
	for i, b := range scan {
		c := &cands[i]
		*c = Candidate{Index: i, KVUse: briefs[i].KVUse, LoRA: 0.5}
		matched := 0
		if len(blocks) > 0 {
			matched = b.prefix.Match(blocks)
			c.Prefix = float64(matched) / float64(len(blocks))
		}
		li.Own = OwnPrefill(info.PromptTokens, matched, p.sc.pc.BlockChars)
		c.Queue = p.sc.pc.Load.BriefQueue(&briefs[i], &li)
	}
	if len(blocks) > 0 {
		limitAffinity(cands, float64(p.sc.pc.AffinityGap))
	}
	if w.Queue == 0 && w.KVCache == 0 {
		w.Queue = 1
	}
	i, _ := PickBest(cands, &w, p.sc.rand())
	if i < 0 {
		return nil
	}
	return scan[cands[i].Index]
}
