package probe

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// callsTo counts f's fetches of addr.
func (f *fakeFetcher) callsTo(addr string) int {
	n := 0
	for _, a := range f.called() {
		if a == addr {
			n++
		}
	}
	return n
}

// TestProberCoalescesConcurrentRuns: 32 requests asking about the same two
// backends at the same instant send one probe each, not 64, and all get
// the answer.
func TestProberCoalescesConcurrentRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeFetcher()
		f.delay["a"], f.delay["b"] = ms, 2*ms
		backends := states("a", "b")
		obs := newCountObserver()
		p := NewProber(ProberConfig{Deadline: 5 * ms, HedgeAfter: time.Hour, Quorum: 2}, f, obs, nil)
		var (
			wg        sync.WaitGroup
			coalesced atomic.Int64
			sent      atomic.Int64
		)
		for range 32 {
			wg.Go(func() {
				res := p.Run(context.Background(), backends, nil)
				if res.Answered != 2 || res.Waited != 2*ms || res.TimedOut != 0 {
					t.Errorf("Run = %+v, want both answers at 2ms", res)
				}
				coalesced.Add(int64(res.Coalesced))
				sent.Add(int64(res.Probed))
			})
		}
		wg.Wait()
		if got := f.called(); len(got) != 2 {
			t.Errorf("fetched %q, want one probe per backend", got)
		}
		if sent.Load() != 2 || coalesced.Load() != 62 {
			t.Errorf("sent %d, coalesced %d; want 2 and 62", sent.Load(), coalesced.Load())
		}
		if obs.probe(OutcomeCoalesced) != 62 || obs.probe(OutcomeOK) != 2 {
			t.Errorf("observed %v", obs.probes)
		}
	})
}

// TestProberJoinerKeepsItsOwnDeadline: a request that joins a probe in
// flight gives up at its own deadline, and its leaving does not cut the
// probe for the request that sent it.
func TestProberJoinerKeepsItsOwnDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeFetcher()
		f.delay["a"] = 4 * ms
		a := states("a")
		obs := newCountObserver()
		p := NewProber(ProberConfig{Deadline: 5 * ms, HedgeAfter: time.Hour, Quorum: 1}, f, obs, nil)
		var first Result
		done := make(chan struct{})
		go func() {
			defer close(done)
			first = p.Run(context.Background(), a, nil)
		}()
		time.Sleep(ms)
		ctx, cancel := context.WithTimeout(context.Background(), ms)
		defer cancel()
		second := p.Run(ctx, a, nil)
		if want := (Result{Coalesced: 1, TimedOut: 1, Waited: ms}); second != want {
			t.Errorf("joiner: Run = %+v, want %+v", second, want)
		}
		<-done
		if want := (Result{Probed: 1, Answered: 1, Waited: 4 * ms}); first != want {
			t.Errorf("sender: Run = %+v, want %+v", first, want)
		}
		if n := f.callsTo("a"); n != 1 {
			t.Errorf("%d fetches of a, want 1", n)
		}
		if err := f.seenCtxErr("a"); err != nil {
			t.Errorf("probe saw %v: the joiner's deadline cut it", err)
		}
	})
}

// TestProberCancelsLoserOnlyWhenNobodyWaits: the slow probe that lost a
// quorum stays in the air while another request still needs it, is
// cancelled when the last one leaves, and is counted as cancelled, not as
// a timeout.
func TestProberCancelsLoserOnlyWhenNobodyWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeFetcher()
		f.delay["a"], f.delay["slow"], f.delay["c"] = ms, time.Hour, 3*ms
		bs := states("a", "slow", "c")
		a, slow, c := bs[0], bs[1], bs[2]
		obs := newCountObserver()
		p := NewProber(ProberConfig{Deadline: 5 * ms, HedgeAfter: time.Hour, Quorum: 1}, f, obs, nil)
		var wg sync.WaitGroup
		var r1, r2 Result
		wg.Go(func() { r1 = p.Run(context.Background(), []*State{a, slow}, nil) })
		wg.Go(func() { r2 = p.Run(context.Background(), []*State{slow, c}, nil) })
		time.Sleep(2 * ms) // r1 decided at 1ms; r2 still waits for slow or c
		synctest.Wait()
		if f.seenCtxErr("slow") != nil || f.active.Load() != 2 {
			t.Fatalf("slow probe ended while a request still waited for it (active %d)", f.active.Load())
		}
		wg.Wait()
		synctest.Wait()
		if err := f.seenCtxErr("slow"); err == nil {
			t.Fatal("slow probe not cancelled after every waiter decided")
		}
		if r1.Cancelled != 1 || r2.Cancelled != 1 || r1.Probed+r2.Probed != 3 || r1.Coalesced+r2.Coalesced != 1 {
			t.Errorf("Run = %+v and %+v", r1, r2)
		}
		if obs.probe(OutcomeCancelled) != 1 || obs.probe(OutcomeTimeout) != 0 || obs.probe(OutcomeOK) != 2 {
			t.Errorf("observed %v, want 2 ok and 1 cancelled", obs.probes)
		}
	})
}

// TestProberAbandonedFlightIsNotJoined: a probe that every waiter left
// (but that cannot be interrupted, like fasthttp's) is not joined by a
// later request, which sends its own; the late answer is still Reported.
func TestProberAbandonedFlightIsNotJoined(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeFetcher()
		f.delay["a"], f.delay["deaf"] = ms, 3*ms
		f.deaf["deaf"] = true
		bs := states("a", "deaf")
		obs := newCountObserver()
		p := NewProber(ProberConfig{Deadline: 5 * ms, HedgeAfter: time.Hour, Quorum: 1}, f, obs, nil)
		if res := p.Run(context.Background(), bs, nil); res.Answered != 1 || res.Cancelled != 1 {
			t.Fatalf("Run = %+v", res)
		}
		// The deaf probe is still in flight, abandoned: a new request on it
		// sends another probe.
		res := p.Run(context.Background(), bs[1:], nil)
		if res.Probed != 1 || res.Coalesced != 0 || res.Answered != 1 {
			t.Errorf("second Run = %+v, want its own probe", res)
		}
		if calls := f.called(); !slices.Equal(calls, []string{"a", "deaf", "deaf"}) && !slices.Equal(calls, []string{"deaf", "a", "deaf"}) {
			t.Errorf("fetched %q", calls)
		}
		synctest.Wait()
		if obs.probe(OutcomeOK) != 3 || obs.probe(OutcomeCancelled) != 0 {
			t.Errorf("observed %v: answers that arrive count as ok", obs.probes)
		}
	})
}

// TestProberHedgeJoinsFlight: a hedge to a spare already being probed by
// another request joins that probe.
func TestProberHedgeJoinsFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeFetcher()
		f.delay["a"], f.delay["s"] = time.Hour, 2*ms
		bs := states("a", "s")
		obs := newCountObserver()
		p := NewProber(ProberConfig{Deadline: 5 * ms, HedgeAfter: ms, Hedges: 1, Quorum: 1}, f, obs, nil)
		var other Result
		done := make(chan struct{})
		go func() {
			defer close(done)
			other = p.Run(context.Background(), bs[1:], nil) // probes s at 0
		}()
		res := p.Run(context.Background(), bs[:1], bs[1:])
		<-done
		want := Result{Probed: 1, Coalesced: 1, Hedged: 1, Answered: 1, Cancelled: 1, SparesUsed: 1, Waited: 2 * ms}
		if res != want || other.Answered != 1 {
			t.Errorf("Run = %+v\nwant  %+v (other %+v)", res, want, other)
		}
		if n := f.callsTo("s"); n != 1 {
			t.Errorf("%d probes of s, want 1", n)
		}
		synctest.Wait()
	})
}
