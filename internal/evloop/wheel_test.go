package evloop

import (
	"slices"
	"testing"
)

type wt struct {
	name string
	tm   timer
}

func (w *wt) timerOf() *timer { return &w.tm }

// fired advances w to now and returns the names fired, sorted.
func fired(w *wheel[*wt], now int64) []string {
	var got []string
	w.advance(now, func(v *wt) { got = append(got, v.name) })
	slices.Sort(got)
	return got
}

// Deadlines fire at the first advance at or after them, never before; a
// deadline moved later (a field store) or earlier, or disarmed, is
// honoured; a clock jump past a whole turn fires what is due and keeps
// what is not.
func TestWheel(t *testing.T) {
	const tick = 10
	w := newWheel[*wt](tick, 8, 1000)
	a, b, c, d, e := &wt{name: "a"}, &wt{name: "b"}, &wt{name: "c"}, &wt{name: "d"}, &wt{name: "e"}
	w.arm(a, 1050)
	w.arm(b, 1050)
	w.arm(c, 1200) // beyond one turn (80): re-queued when its slot comes up
	w.arm(d, 1500)
	w.arm(e, 1040)
	w.arm(b, 1100) // later: lazy
	w.arm(d, 1030) // earlier: a new entry
	w.disarm(e)
	steps := []struct {
		now  int64
		want []string
	}{
		{1029, nil},
		{1049, []string{"d"}},
		{1050, []string{"a"}},
		{1099, nil},
		{1100, []string{"b"}},
		{1199, nil},
		{1205, []string{"c"}},
		{5000, nil},
	}
	for _, s := range steps {
		if got := fired(w, s.now); !slices.Equal(got, s.want) {
			t.Fatalf("at %d fired %v, want %v", s.now, got, s.want)
		}
	}
	// A jump over several turns.
	w.arm(a, 5100)
	w.arm(b, 9000)
	if got := fired(w, 6000); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("after the jump fired %v", got)
	}
	if got := fired(w, 9000); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("then fired %v", got)
	}
	// fire may re-arm its own timer.
	w.arm(a, 9100)
	n := 0
	w.advance(9100, func(v *wt) { n++; w.arm(v, 9200) })
	if got := fired(w, 9200); n != 1 || !slices.Equal(got, []string{"a"}) {
		t.Fatalf("re-armed in fire: %d, %v", n, got)
	}
}

// Re-arming a deadline later is a field store: steady state allocates
// nothing.
func BenchmarkWheelRearm(b *testing.B) {
	w := newWheel[*wt](10, 4096, 0)
	v := &wt{}
	now := int64(0)
	b.ReportAllocs()
	for b.Loop() {
		now += 3
		w.arm(v, now+5000)
		w.advance(now, func(*wt) {})
	}
}
