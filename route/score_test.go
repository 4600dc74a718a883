package route

import (
	"math/rand/v2"
	"testing"
)

func TestPickLeast(t *testing.T) {
	cases := []struct {
		name  string
		queue []float64
		want  []int // acceptable winners
	}{
		{"empty", nil, []int{-1}},
		{"single", []float64{7}, []int{0}},
		{"smallest wins", []float64{3, 1, 2}, []int{1}},
		{"ties among smallest", []float64{2, 1, 1, 5}, []int{1, 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cands := make([]Candidate, len(c.queue))
			for i, q := range c.queue {
				cands[i] = Candidate{Index: i, Queue: q}
			}
			for r := uint64(0); r < 50; r++ {
				got := PickLeast(cands, r)
				ok := false
				for _, w := range c.want {
					ok = ok || got == w
				}
				if !ok {
					t.Fatalf("PickLeast(%v, %d) = %d, want one of %v", c.queue, r, got, c.want)
				}
			}
		})
	}
}

func TestPickLeastBreaksTiesUniformly(t *testing.T) {
	cands := []Candidate{{Queue: 1}, {Queue: 1}, {Queue: 1}, {Queue: 9}}
	var hits [4]int
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 30000
	for i := 0; i < n; i++ {
		hits[PickLeast(cands, rng.Uint64())]++
	}
	for i := 0; i < 3; i++ {
		if share := float64(hits[i]) / n; share < 0.30 || share > 0.37 {
			t.Fatalf("tie %d won %.3f of picks, want about 1/3 (hits %v)", i, share, hits)
		}
	}
	if hits[3] != 0 {
		t.Fatalf("the longest queue won %d times", hits[3])
	}
}

func TestPickBest(t *testing.T) {
	w := Weights{Queue: 2, KVCache: 2, Prefix: 3, LoRA: 1}
	cases := []struct {
		name     string
		cands    []Candidate
		want     int
		wantShed bool
	}{
		{"shorter queue wins", []Candidate{{Queue: 5, KVUse: 0.5, LoRA: 0.5}, {Queue: 1, KVUse: 0.5, LoRA: 0.5}}, 1, false},
		{"kv breaks equal queues", []Candidate{{Queue: 2, KVUse: 0.9, LoRA: 0.5}, {Queue: 2, KVUse: 0.1, LoRA: 0.5}}, 1, false},
		{"prefix outweighs a small queue gap", []Candidate{{Queue: 3, KVUse: 0.2, Prefix: 1, LoRA: 0.5}, {Queue: 2, KVUse: 0.2, LoRA: 0.5}}, 0, false},
		{"saturated dropped", []Candidate{{Queue: 0, KVUse: 0.1, Saturated: true, Known: true}, {Queue: 40, KVUse: 0.5, Known: true}}, 1, false},
		{"all saturated and known: shed", []Candidate{{Queue: 9, Saturated: true, Known: true}, {Queue: 3, Saturated: true, Known: true}}, 1, true},
		{"all saturated, one unknown: never shed", []Candidate{{Queue: 9, Saturated: true, Known: true}, {Queue: 3, Saturated: true}}, 1, false},
		{"unknown kv is neutral", []Candidate{{Queue: 1, KVUse: -1}, {Queue: 1, KVUse: 0.6}}, 0, false},
		{"lora loaded wins equal load", []Candidate{{Queue: 1, KVUse: 0.3, LoRA: 0}, {Queue: 1, KVUse: 0.3, LoRA: 1}}, 1, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, shed := PickBest(c.cands, &w, 42)
			if got != c.want || shed != c.wantShed {
				t.Fatalf("PickBest = (%d, %v), want (%d, %v)", got, shed, c.want, c.wantShed)
			}
		})
	}
	if got, _ := PickBest(nil, &w, 1); got != -1 {
		t.Fatalf("PickBest(nil) = %d, want -1", got)
	}
}

func TestPickersDoNotAllocate(t *testing.T) {
	w := Weights{Queue: 2, KVCache: 2, Prefix: 3, LoRA: 1}
	cands := []Candidate{{Queue: 3, KVUse: 0.2}, {Queue: 1, KVUse: 0.7}, {Queue: 1, KVUse: 0.7}}
	if n := leastAllocsPerRun(1000, func() { PickLeast(cands, 7); PickBest(cands, &w, 7) }); n != 0 {
		t.Fatalf("pickers allocate %.1f times per call", n)
	}
}

func TestLimitAffinity(t *testing.T) {
	w := Weights{Queue: 2, KVCache: 2, Prefix: 3, LoRA: 1}
	// The prefix holder is 5 requests behind: within a gap of 2 it would
	// win on prefix (3 > 2 for the queue); beyond it, the idle one wins.
	c := []Candidate{{Queue: 5, KVUse: 0.2, Prefix: 1, LoRA: 1}, {Queue: 0, KVUse: 0.2, LoRA: 0.5}}
	if got, _ := PickBest(c, &w, 1); got != 0 {
		t.Fatalf("without the limit the prefix holder should win (got %d)", got)
	}
	limitAffinity(c, 2)
	if c[0].Prefix != 0 || c[0].LoRA != 0.5 {
		t.Fatalf("affinity kept beyond the gap: %+v", c[0])
	}
	if got, _ := PickBest(c, &w, 1); got != 1 {
		t.Fatalf("beyond the gap the idle backend must win, got %d", got)
	}
	// Within the gap affinity stays.
	c = []Candidate{{Queue: 2, KVUse: 0.2, Prefix: 1}, {Queue: 0, KVUse: 0.2}}
	limitAffinity(c, 2)
	if c[0].Prefix != 1 {
		t.Fatal("affinity removed within the gap")
	}
	// Saturated candidates do not set the baseline.
	c = []Candidate{{Queue: 0, Saturated: true}, {Queue: 6, Prefix: 1}}
	limitAffinity(c, 2)
	if c[1].Prefix != 1 {
		t.Fatal("a saturated candidate must not set the shortest queue")
	}
}
