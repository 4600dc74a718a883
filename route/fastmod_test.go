package route

import (
	"math"
	"math/rand/v2"
	"testing"
)

// modN is exactly the % operator: for pool sizes 1..4,096, some large and
// extreme divisors, and for each the values around 0, multiples of n, the
// top of the range, and random values.
func TestModNIsExact(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	ns := []uint64{math.MaxUint64, math.MaxUint64 - 1, 1 << 63, 1<<63 + 1, 1 << 32, 1<<32 - 1, 1<<32 + 1, 3_000_000_019}
	for n := uint64(1); n <= 4096; n++ {
		ns = append(ns, n)
	}
	for range 200 {
		ns = append(ns, r.Uint64()>>r.IntN(64)|1)
	}
	for _, n := range ns {
		m := modOf(n)
		xs := []uint64{0, 1, n - 1, n, n + 1, 2*n - 1, 2 * n, math.MaxUint64, math.MaxUint64 - 1, math.MaxUint64 / n * n, math.MaxUint64/n*n - 1}
		for range 300 {
			xs = append(xs, r.Uint64())
		}
		for _, x := range xs {
			if got, want := m.mod(x), x%n; got != want {
				t.Fatalf("%d mod %d = %d, want %d", x, n, got, want)
			}
		}
	}
	for ties := 1; ties <= maxTies+3; ties++ {
		for range 100 {
			x := r.Uint64()
			if got := tieMod(x, ties); got != x%uint64(ties) {
				t.Fatalf("tieMod(%d, %d) = %d", x, ties, got)
			}
		}
	}
}

func BenchmarkModN(b *testing.B) {
	m := newModN(64)
	x := uint64(0x9E3779B97F4A7C15)
	var sink uint64
	b.Run("modN", func(b *testing.B) {
		for b.Loop() {
			x = x*6364136223846793005 + 1442695040888963407
			sink += m.mod(x)
		}
	})
	n := uint64(64) | uint64(len(b.Name())>>10) // not a constant
	b.Run("div", func(b *testing.B) {
		for b.Loop() {
			x = x*6364136223846793005 + 1442695040888963407
			sink += x % n
		}
	})
	_ = sink
}
