package route

import (
	"time"

	"github.com/probegate/probegate/probe"
)

// Candidate is the value the pickers decide on: one sampled backend's view,
// already reduced to numbers. Pickers are pure functions over candidates:
// no I/O, no clock, no allocation.
type Candidate struct {
	// Index identifies the backend to the caller (an index into its slice).
	Index int
	// Queue is the backend's (corrected) queue: running + waiting, or this
	// proxy's in-flight count when nothing fresher is known.
	Queue float64
	// KVUse is the KV-cache use in 0..1, or negative when unknown.
	KVUse float64
	// Prefix is the share of the request's prefix blocks believed cached
	// there, 0..1.
	Prefix float64
	// LoRA is the LoRA affinity score, 0..1 (0.5 is neutral).
	LoRA float64
	// Saturated is set when the backend reported more waiting requests or
	// KV use than route.saturation allows.
	Saturated bool
	// Known is false when the view is this proxy's local count alone.
	Known bool
}

// Weights are the scorer weights of route.weights.
type Weights struct {
	Queue, KVCache, Prefix, LoRA float64
}

// mix64 is a SplitMix64 step: it turns one random value into a sequence for
// tie-breaking without touching shared state.
func mix64(x *uint64) uint64 {
	*x += 0x9E3779B97F4A7C15
	z := *x
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// PickLeast returns the position in c of the candidate with the smallest
// Queue, breaking ties uniformly at random with r. It returns -1 for an
// empty slice. This is power-of-d on queue length when c holds d samples.
func PickLeast(c []Candidate, r uint64) int {
	best, ties := -1, 0
	for i := range c {
		switch {
		case best < 0 || c[i].Queue < c[best].Queue:
			best, ties = i, 1
		case c[i].Queue == c[best].Queue:
			ties++
			if tieMod(mix64(&r), ties) == 0 {
				best = i
			}
		}
	}
	return best
}

// Score returns candidate i's weighted score in [0, sum of weights]:
//
//	queue:  (maxQ - q) / (maxQ - minQ) over the candidates, 1 when all equal
//	kv:     1 - KVUse, 0.5 when unknown
//	prefix: the matched share of prefix blocks
//	lora:   the LoRA score (1 loaded, 0.5 free slot or neutral, 0 full)
//
// minQ and maxQ are the smallest and largest Queue among the candidates.
// The queue scorer is normalised across candidates as EPP's is, so its
// weight means the same with d=2 as with 64 candidates.
func Score(c *Candidate, w *Weights, minQ, maxQ float64) float64 {
	qs := 1.0
	if maxQ > minQ {
		qs = (maxQ - c.Queue) / (maxQ - minQ)
	}
	kv := 0.5
	if c.KVUse >= 0 {
		kv = 1 - c.KVUse
		if kv < 0 {
			kv = 0
		}
	}
	return w.Queue*qs + w.KVCache*kv + w.Prefix*c.Prefix + w.LoRA*c.LoRA
}

// PickBest returns the position in c of the best candidate: saturated
// candidates are dropped unless all are saturated; the highest Score wins,
// ties broken uniformly at random with r; -1 for an empty slice. The
// second result reports whether every candidate was saturated and known,
// which is when a proxy configured to shed answers 429 (never when the
// state is unknown).
func PickBest(c []Candidate, w *Weights, r uint64) (int, bool) {
	if len(c) == 0 {
		return -1, false
	}
	allSat, allKnownSat := true, true
	for i := range c {
		if !c[i].Saturated {
			allSat, allKnownSat = false, false
			break
		}
		if !c[i].Known {
			allKnownSat = false
		}
	}
	minQ, maxQ := 0.0, 0.0
	first := true
	for i := range c {
		if c[i].Saturated && !allSat {
			continue
		}
		if first || c[i].Queue < minQ {
			minQ = c[i].Queue
		}
		if first || c[i].Queue > maxQ {
			maxQ = c[i].Queue
		}
		first = false
	}
	best, ties := -1, 0
	bestScore := 0.0
	for i := range c {
		if c[i].Saturated && !allSat {
			continue
		}
		s := Score(&c[i], w, minQ, maxQ)
		switch {
		case best < 0 || s > bestScore+1e-12:
			best, bestScore, ties = i, s, 1
		case s >= bestScore-1e-12:
			ties++
			if tieMod(mix64(&r), ties) == 0 {
				best = i
			}
		}
	}
	return best, allSat && allKnownSat
}

// limitAffinity removes the affinity of candidates that are too loaded for
// it to pay: a candidate whose Queue exceeds the shortest unsaturated
// candidate queue by more than gap loses its prefix score and gets a
// neutral LoRA score. A cached prefix saves prefill; a backlog costs whole
// requests (route.affinity_max_queue_gap). Pure, no allocation.
func limitAffinity(c []Candidate, gap float64) {
	minQ, found := 0.0, false
	for i := range c {
		if !c[i].Saturated && (!found || c[i].Queue < minQ) {
			minQ, found = c[i].Queue, true
		}
	}
	if !found {
		return
	}
	for i := range c {
		if c[i].Queue > minQ+gap {
			c[i].Prefix = 0
			if c[i].LoRA > 0.5 {
				c[i].LoRA = 0.5
			}
		}
	}
}

// scorer is what the scoring pickers (cached, probe) share: the pool, the
// settings and the dependencies, and best, which turns views into
// candidates and picks.
type scorer struct {
	bs    []*Backend
	pc    PickerConfig
	rand  Rand
	now   func() time.Time
	views ViewSource
	mem   *Memory
	// state is set when views is StateViews: briefs are then read from
	// each backend's probe.State directly.
	state bool
	// modN reduces random values modulo len(bs).
	modN modN
}

func newScorer(pc *PickerConfig, pool *Pool, d *Deps) scorer {
	_, state := d.Views.(StateViews)
	return scorer{bs: pool.backends, pc: *pc, rand: d.Rand, now: d.Now, views: d.Views, mem: d.Memory, state: state, modN: newModN(len(pool.backends))}
}

// view sets *dst to b's view at now, in place when the views are the
// backends' own states.
func (sc *scorer) view(dst *probe.View, b *Backend, now time.Time) {
	if sc.state {
		b.state.ViewInto(dst, now, sc.pc.StaleAfter)
		return
	}
	*dst = sc.views.View(b, now, sc.pc.StaleAfter)
}

// brief sets *dst to b's load fields at now (cutoff is now less
// scrape.stale_after): those of its View, read without building the View
// when the views are the backends' own states.
func (sc *scorer) brief(dst *probe.Brief, b *Backend, now, cutoff time.Time) {
	if sc.state {
		b.state.BriefInto(dst, cutoff)
		return
	}
	v := sc.views.View(b, now, sc.pc.StaleAfter)
	*dst = v.Brief()
}

// best builds each of bs's candidate values from its view and picks the
// best (PickBest), after limitAffinity. It reports the deciding view's
// source and age. Views listing LoRA adapters teach Memory's adapter set.
func (sc *scorer) best(info *RequestInfo, s *Scratch, bs []*Backend) (*Backend, Decision, error) {
	now := sc.now()
	s.cands = s.cands[:0]
	s.views = s.views[:0]
	for _, b := range bs {
		s.views = append(s.views, probe.View{})
		v := &s.views[len(s.views)-1]
		sc.view(v, b, now)
		if v.MaxLoRA > 0 {
			sc.mem.learnAdapters(v, b)
		}
	}
	adapter := info.ModelHash != 0 && sc.mem.adapters.Has(info.ModelHash)
	blocks := info.Blocks[:info.NBlocks]
	sat := &sc.pc.Saturation
	li := loadInput(sc.mem, &sc.pc.Load, info, s.views, now)
	for i, b := range bs {
		v := &s.views[i]
		c := Candidate{Index: i, KVUse: v.KVUse, Known: v.Source != probe.SourceLocal && v.Source != probe.SourceNone}
		matched := 0
		if len(blocks) > 0 {
			matched = b.prefix.Match(blocks)
			c.Prefix = float64(matched) / float64(len(blocks))
		}
		li.Own = OwnPrefill(info.PromptTokens, matched, sc.pc.BlockChars)
		c.Queue = sc.pc.Load.Queue(v, &li)
		isAdapter := adapter || (len(info.Model) > 0 && v.BaseModel != "" && string(info.Model) != v.BaseModel)
		c.LoRA = loraScore(info.ModelHash, isAdapter, v, &b.lora, now, loraWindow)
		if c.Known {
			if sat.MaxKVCache > 0 && v.KVUse >= sat.MaxKVCache {
				c.Saturated = true
			}
			if sat.MaxWaiting > 0 && v.Waiting >= sat.MaxWaiting {
				c.Saturated = true
			}
		}
		s.cands = append(s.cands, c)
	}
	limitAffinity(s.cands, float64(sc.pc.AffinityGap))
	i, allSat := PickBest(s.cands, &sc.pc.Weights, sc.rand())
	if i < 0 {
		return nil, Decision{}, ErrNoBackend
	}
	if allSat && sat.Shed {
		return nil, Decision{}, ErrSaturated
	}
	v := &s.views[s.cands[i].Index]
	return bs[s.cands[i].Index], Decision{Source: v.Source, Age: v.Age}, nil
}
