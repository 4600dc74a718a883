package route

import "math/bits"

// modN computes x % n for one fixed n without a division instruction: a
// 64-bit DIV costs tens of cycles on the server CPUs the proxy runs on,
// and a pick reduces some twenty random values modulo the pool size (the
// memory slot's sample, the random slots, the spares) and modulo the tie
// count. The result is exactly x % n for every x, so the random draws and
// the picks are the same as with the % operator.
//
// Method: Lemire, Kaser and Kurz, "Faster remainder by direct computation"
// (2019): with c = ceil(2^128 / n), x % n = ((c * x mod 2^128) * n) >> 128
// for every 64-bit x and every n < 2^64 (their Theorem 1 with F = 128,
// N = 64). Three 64x64-bit multiplications instead of a division.
type modN struct {
	n      uint64
	cHi, c uint64 // c = ceil(2^128 / n), 128 bits; unused when n < 2
}

// newModN returns the modN of n (n >= 1; n = 0 is taken as 1).
func newModN(n int) modN { return modOf(uint64(max(n, 1))) }

// modOf returns the modN of n >= 1.
func modOf(n uint64) modN {
	m := modN{n: n}
	if m.n < 2 {
		return m
	}
	// floor((2^128 - 1) / n) + 1 = ceil(2^128 / n) for every n >= 2.
	hi, rem := bits.Div64(0, ^uint64(0), m.n)
	lo, _ := bits.Div64(rem, ^uint64(0), m.n)
	var carry uint64
	m.c, carry = bits.Add64(lo, 1, 0)
	m.cHi = hi + carry
	return m
}

// mod returns x % n.
func (m *modN) mod(x uint64) uint64 {
	if m.n < 2 {
		return 0
	}
	// low = c * x mod 2^128
	h, lowLo := bits.Mul64(m.c, x)
	lowHi := m.cHi*x + h
	// (low * n) >> 128
	a1, _ := bits.Mul64(lowLo, m.n)
	b1, b0 := bits.Mul64(lowHi, m.n)
	_, carry := bits.Add64(b0, a1, 0)
	return b1 + carry
}

// smallMods are the modN of 0..maxTies, for breaking ties among up to
// maxTies candidates.
const maxTies = 64

var smallMods = func() (t [maxTies + 1]modN) {
	for i := range t {
		t[i] = newModN(i)
	}
	return t
}()

// tieMod returns x % ties for ties >= 1, without a division when ties is
// at most maxTies.
func tieMod(x uint64, ties int) uint64 {
	if ties <= maxTies {
		return smallMods[ties].mod(x)
	}
	return x % uint64(ties)
}
