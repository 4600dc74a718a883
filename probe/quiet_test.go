package probe

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// levelFetcher answers at once with Running = the current level and
// counts its fetches.
type levelFetcher struct {
	level   atomic.Int64
	fetches atomic.Int64
}

func (f *levelFetcher) Fetch(context.Context, *State, Endpoint) (Load, error) {
	f.fetches.Add(1)
	l := Unknown(time.Now(), SourceNone)
	l.Running, l.Waiting, l.KVUse = int(f.level.Load()), 0, 0
	return l, nil
}

// A pod whose probe answers say the same thing again and again is asked
// less and less often (up to 2^quietMaxShift x FreshFor between probes),
// and as often as FreshFor allows again from the first answer that
// differs. Requests arrive every 500 µs, as at 2k req/s.
func TestProberQuietBackendIsAskedLessOften(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &levelFetcher{}
		p := NewProber(ProberConfig{Deadline: 5 * ms, HedgeAfter: time.Hour, Quorum: 1, FreshFor: 2 * ms}, f, nil, nil)
		cands := states("a")
		// run sends Runs every 500µs for d and returns the fetches made.
		run := func(d time.Duration, each func()) int64 {
			before := f.fetches.Load()
			for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(ms / 2) {
				if each != nil {
					each()
				}
				p.Run(context.Background(), cands, nil)
				synctest.Wait() // background refreshes land
			}
			return f.fetches.Load() - before
		}

		// An idle pod: one probe per 16 ms once backed off (fresh for
		// 16 ms, then refreshed by a probe nobody waits for, which
		// answers at once here); without the back-off one per 2 ms.
		run(100*ms, nil) // back off
		if n := run(320*ms, nil); n > 320/16+1 {
			t.Fatalf("quiet pod: %d probes in 320 ms, want at most %d (one per 16 ms)", n, 320/16+1)
		}
		if got := cands[0].quiet.Load(); got != quietMaxShift {
			t.Fatalf("quiet streak %d, want %d", got, quietMaxShift)
		}

		// Its load moves: back to one probe per 2-4 ms at once.
		level := int64(0)
		move := func() { level++; f.level.Store(level) }
		run(40*ms, move) // the first changed answer resets the back-off
		if n := run(320*ms, move); n < 320/4 {
			t.Fatalf("busy pod: %d probes in 320 ms, want at least %d (one per 2-4 ms)", n, 320/4)
		}
		if got := cands[0].quiet.Load(); got != 0 {
			t.Fatalf("quiet streak %d on a pod whose answers change, want 0", got)
		}
	})
}

// What counts as the same answer: every field the pick reads or that shows
// the engine working.
func TestSameLoad(t *testing.T) {
	base := Load{Running: 2, Waiting: 1, KVUse: 0.25, ServerLoad: -1, Tokens: 100, PrefillTokens: 40}
	if !sameLoad(&base, &base) {
		t.Fatal("a load differs from itself")
	}
	for name, change := range map[string]func(*Load){
		"running":        func(l *Load) { l.Running++ },
		"waiting":        func(l *Load) { l.Waiting++ },
		"kv":             func(l *Load) { l.KVUse += 0.01 },
		"server load":    func(l *Load) { l.ServerLoad = 3 },
		"tokens":         func(l *Load) { l.Tokens++ },
		"prefill tokens": func(l *Load) { l.PrefillTokens++ },
	} {
		l := base
		change(&l)
		if sameLoad(&base, &l) {
			t.Errorf("%s changed but sameLoad says the same", name)
		}
	}
}
