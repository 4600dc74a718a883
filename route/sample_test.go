package route

import (
	"slices"
	"testing"
)

// sampleByScan is sampleEligible as it was before the bitset and modN: the
// reference the fast version must match draw for draw.
func sampleByScan(pool []*Backend, out []*Backend, exclude []*Backend, rnd Rand) int {
	n := len(pool)
	if n == 0 || len(out) == 0 {
		return 0
	}
	k := 0
	for tries := 0; tries < 4*len(out) && k < len(out); tries++ {
		b := pool[int(rnd()%uint64(n))]
		if b.Eligible() && !contains(out[:k], b) && !contains(exclude, b) {
			out[k] = b
			k++
		}
	}
	if k < len(out) {
		start := int(rnd() % uint64(n))
		for i := 0; i < n && k < len(out); i++ {
			b := pool[(start+i)%n]
			if b.Eligible() && !contains(out[:k], b) && !contains(exclude, b) {
				out[k] = b
				k++
			}
		}
	}
	return k
}

// sampleEligible draws exactly the backends the plain scan did, for pools
// on both sides of sampleBits, samples on both sides of the bitset's
// threshold, with draining backends (so the fallback scan runs) and
// exclusions.
func TestSampleEligibleMatchesScan(t *testing.T) {
	for _, n := range []int{1, 3, 5, 17, 64, 1024, 1500} {
		_, bs := testPool(n)
		mod := newModN(n)
		for seed := range uint64(40) {
			r := seeded(seed + 100)
			for _, b := range bs {
				b.draining.Store(r()%3 == 0 && seed%2 == 0)
			}
			excl := []*Backend{bs[int(r()%uint64(n))]}
			for _, size := range []int{1, 2, 5, 16} {
				got := make([]*Backend, size)
				want := make([]*Backend, size)
				k := sampleEligible(bs, &mod, got, excl, seeded(seed))
				kw := sampleByScan(bs, want, excl, seeded(seed))
				if k != kw || !slices.Equal(got[:k], want[:kw]) {
					t.Fatalf("n=%d seed=%d size=%d: got %d backends, the scan %d (or other ones)", n, seed, size, k, kw)
				}
			}
		}
		for _, b := range bs {
			b.draining.Store(false)
		}
	}
}
