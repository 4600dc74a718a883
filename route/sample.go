package route

import "math/rand/v2"

// Rand is the source of randomness of the request path: a function returning
// uniformly random 64-bit values, safe for concurrent use. Production code
// uses math/rand/v2's Uint64; tests inject a seeded generator.
type Rand func() uint64

// defaultRand is the Rand of a Proxy or Picker given none.
var defaultRand Rand = rand.Uint64

// sampleEligible writes up to len(out) distinct eligible backends of pool,
// chosen uniformly at random, into out, skipping those in exclude, and
// returns how many it wrote. It makes at most 4*len(out) random draws, then
// falls back to a scan from a random offset so that a mostly-open pool is
// still covered. mod is newModN(len(pool)). It does not allocate.
func sampleEligible(pool []*Backend, mod *modN, out []*Backend, exclude []*Backend, rnd Rand) int {
	n := len(pool)
	if n == 0 || len(out) == 0 {
		return 0
	}
	k := 0
	for tries := 0; tries < 4*len(out) && k < len(out); tries++ {
		b := pool[mod.mod(rnd())]
		if b.Eligible() && !contains(out[:k], b) && !contains(exclude, b) {
			out[k] = b
			k++
		}
	}
	if k < len(out) {
		start := int(mod.mod(rnd()))
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

func contains(s []*Backend, b *Backend) bool {
	for _, x := range s {
		if x == b {
			return true
		}
	}
	return false
}
