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
// still covered. mod is newModN(len(pool)); pool lists each backend once.
// It does not allocate.
func sampleEligible(pool []*Backend, mod *modN, out []*Backend, exclude []*Backend, rnd Rand) int {
	n := len(pool)
	if n == 0 || len(out) == 0 {
		return 0
	}
	// A larger sample (the memory slot's) from a pool of at most
	// sampleBits backends remembers the positions it took in a bitset
	// rather than scanning out for each draw; the same backends result,
	// since a pool lists each backend once.
	var taken [sampleBits / 64]uint64
	bits := len(out) > 4 && n <= sampleBits
	k := 0
	// take adds pool[i] to out if it is not there yet, eligible and not
	// excluded.
	take := func(i int) {
		b := pool[i]
		var dup bool
		if bits {
			dup = taken[i>>6]&(1<<(i&63)) != 0
		} else {
			dup = contains(out[:k], b)
		}
		if !dup && b.Eligible() && !contains(exclude, b) {
			out[k] = b
			k++
			if bits {
				taken[i>>6] |= 1 << (i & 63)
			}
		}
	}
	for tries := 0; tries < 4*len(out) && k < len(out); tries++ {
		take(int(mod.mod(rnd())))
	}
	if k < len(out) {
		j := int(mod.mod(rnd())) - 1
		for i := 0; i < n && k < len(out); i++ {
			if j++; j == n {
				j = 0
			}
			take(j)
		}
	}
	return k
}

// sampleBits bounds the pools whose samples sampleEligible tracks in a
// bitset.
const sampleBits = 1024

func contains(s []*Backend, b *Backend) bool {
	for _, x := range s {
		if x == b {
			return true
		}
	}
	return false
}
