package bench

import (
	"testing"
	"time"

	"github.com/probegate/probegate/route"
)

// The learned-speed diagnostic reads the last backend over the mean of the
// others that learned one, and nothing until the last and one other have.
func TestSpeedRatio(t *testing.T) {
	bs := []*route.Backend{route.NewBackend("a:1", 0), route.NewBackend("b:1", 0), route.NewBackend("c:1", 0)}
	learn := func(b *route.Backend, ns float64) {
		b.State().AddWork(1000, 0)
		b.State().PrefillDone(1000, time.Duration(ns*1000), 1000)
	}
	if _, ok := speedRatio(bs); ok {
		t.Fatal("a ratio before any speed was learned")
	}
	learn(bs[2], 300)
	if _, ok := speedRatio(bs); ok {
		t.Fatal("a ratio with only the last backend learned")
	}
	learn(bs[0], 100)
	if r, ok := speedRatio(bs); !ok || r != 3 {
		t.Fatalf("ratio %v (%v), want 3 (300 over the one learned, 100)", r, ok)
	}
	learn(bs[1], 200)
	if r, ok := speedRatio(bs); !ok || r != 2 {
		t.Fatalf("ratio %v (%v), want 2 (300 over the mean 150)", r, ok)
	}
	if _, ok := speedRatio(bs[:1]); ok {
		t.Fatal("a ratio over one backend")
	}
}
