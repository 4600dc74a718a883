package bench

import (
	"testing"
	"time"

	"github.com/probegate/probegate/route"
)

// The learned-speed diagnostic reads the named backend (the fleet's last
// server, wherever the pool's address order puts it) over the mean of the
// others that learned one, and nothing until it and one other have.
func TestSpeedRatio(t *testing.T) {
	bs := []*route.Backend{route.NewBackend("a:1", 0), route.NewBackend("c:1", 0), route.NewBackend("b:1", 0)}
	speedRatio := func(bs []*route.Backend) (float64, bool) { return speedRatio(bs, "c:1", learnedNs) }
	learn := func(b *route.Backend, ns float64) {
		b.State().AddWork(1000, 0)
		b.State().PrefillDone(1000, time.Duration(ns*1000), 1000)
	}
	if _, ok := speedRatio(bs); ok {
		t.Fatal("a ratio before any speed was learned")
	}
	learn(bs[1], 300)
	if _, ok := speedRatio(bs); ok {
		t.Fatal("a ratio with only the last backend learned")
	}
	learn(bs[0], 100)
	if r, ok := speedRatio(bs); !ok || r != 3 {
		t.Fatalf("ratio %v (%v), want 3 (300 over the one learned, 100)", r, ok)
	}
	learn(bs[2], 200)
	if r, ok := speedRatio(bs); !ok || r != 2 {
		t.Fatalf("ratio %v (%v), want 2 (300 over the mean 150)", r, ok)
	}
	if _, ok := speedRatio(bs[:1]); ok {
		t.Fatal("a ratio without the named backend")
	}
}
