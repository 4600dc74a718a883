package probe

import (
	"context"
	"errors"
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
		// Each probe's goroutine reports its outcome after it landed, so
		// after its waiters returned: wait until both are done.
		synctest.Wait()
		if got := f.called(); len(got) != 2 {
			t.Errorf("fetched %q, want one probe per backend", got)
		}
		if sent.Load() != 2 || coalesced.Load() != 62 {
			t.Errorf("sent %d, coalesced %d; want 2 and 62", sent.Load(), coalesced.Load())
		}
		if obs.probe(OutcomeCoalesced) != 62 || obs.probe(OutcomeOK) != 2 {
			t.Errorf("observed %v", obs.probeCounts())
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
			t.Errorf("observed %v, want 2 ok and 1 cancelled", obs.probeCounts())
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
			t.Errorf("observed %v: answers that arrive count as ok", obs.probeCounts())
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

// TestProberDeafProbeEndsAtTheDeadline: a probe whose Fetcher ignores its
// context (fasthttp cannot be interrupted) still ends the Run's wait at
// exactly the deadline: the flight's own timer gives its waiters a
// timeout, with no timer in the Run. The late answer is Reported and
// counted ok, and the backend stays marked slow (it answered late).
func TestProberDeafProbeEndsAtTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeFetcher()
		f.delay["deaf"], f.deaf["deaf"] = 8*ms, true
		bs := states("deaf")
		obs := newCountObserver()
		p := NewProber(ProberConfig{Deadline: 5 * ms, HedgeAfter: time.Hour, Quorum: 1}, f, obs, nil)
		res := p.Run(context.Background(), bs, nil)
		if want := (Result{Probed: 1, TimedOut: 1, Waited: 5 * ms}); res != want {
			t.Fatalf("Run = %+v, want %+v", res, want)
		}
		// A request arriving after the deadline neither waits nor joins
		// the probe that is over: the backend is marked slow, and its
		// probe still in the air stands for the background one.
		time.Sleep(ms)
		if res, want := p.Run(context.Background(), bs, nil), (Result{SkippedSlow: 1}); res != want {
			t.Errorf("second Run = %+v, want %+v", res, want)
		}
		time.Sleep(10 * ms)
		synctest.Wait()
		if l := bs[0].Latest(); l == nil || l.Source != SourceProbe {
			t.Errorf("late answer not reported: %+v", l)
		}
		if n := f.callsTo("deaf"); n != 1 {
			t.Errorf("%d probes of deaf, want 1", n)
		}
		if obs.probe(OutcomeOK) != 1 || obs.probe(OutcomeTimeout) != 0 || obs.probe(OutcomeSkippedSlow) != 1 {
			t.Errorf("observed %v: answers that arrive count as ok", obs.probeCounts())
		}
		if res, want := p.Run(context.Background(), bs, nil), (Result{SkippedSlow: 1}); res != want {
			t.Errorf("after the late answer: Run = %+v, want %+v (still slow)", res, want)
		}
		time.Sleep(10 * ms) // let its background probe end
		synctest.Wait()
	})
}

// TestProberSkipsSlowBackend: once a backend's probe missed the deadline,
// requests stop waiting for it (its cached state stands, the other
// candidates are still probed and waited for) and a probe nobody waits for
// checks it; the first answer in time makes it waited for again.
func TestProberSkipsSlowBackend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeFetcher()
		f.delay["a"], f.delay["b"] = time.Hour, ms
		bs := states("a", "b")
		obs := newCountObserver()
		p := NewProber(ProberConfig{Deadline: 5 * ms, HedgeAfter: time.Hour, Quorum: 2}, f, obs, nil)
		if res, want := p.Run(context.Background(), bs, nil), (Result{Probed: 2, Answered: 1, TimedOut: 1, Waited: 5 * ms}); res != want {
			t.Fatalf("Run = %+v, want %+v", res, want)
		}
		synctest.Wait()
		// a answers fast now, but it is marked slow: not waited for.
		f.mu.Lock()
		f.delay["a"] = 2 * ms
		f.mu.Unlock()
		if res, want := p.Run(context.Background(), bs, nil), (Result{Probed: 1, Answered: 1, SkippedSlow: 1, Waited: ms}); res != want {
			t.Fatalf("Run = %+v, want %+v", res, want)
		}
		if n := f.callsTo("a"); n != 2 {
			t.Fatalf("%d probes of a, want 2 (the second in the background)", n)
		}
		// The background probe is in the air: a request now neither
		// waits for it nor sends another.
		if res, want := p.Run(context.Background(), bs, nil), (Result{Probed: 1, Answered: 1, SkippedSlow: 1, Waited: ms}); res != want {
			t.Fatalf("Run = %+v, want %+v", res, want)
		}
		if n := f.callsTo("a"); n != 2 {
			t.Fatalf("%d probes of a, want 2", n)
		}
		synctest.Wait() // the background probe answered in time (at 2ms)
		if l := bs[0].Latest(); l == nil || l.Source != SourceProbe {
			t.Fatalf("background answer not reported: %+v", l)
		}
		if res, want := p.Run(context.Background(), bs, nil), (Result{Probed: 2, Answered: 2, Waited: 2 * ms}); res != want {
			t.Fatalf("after an answer in time: Run = %+v, want %+v", res, want)
		}
		if obs.probe(OutcomeSkippedSlow) != 2 || obs.probe(OutcomeTimeout) != 1 || obs.probe(OutcomeOK) != 6 {
			t.Errorf("observed %v", obs.probeCounts())
		}
	})
}

// TestProberSlowMarkLapses: a backend marked slow that nobody asked about
// for slowHold is waited for again (a quiet spell is no evidence).
func TestProberSlowMarkLapses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeFetcher()
		f.delay["a"] = time.Hour
		a := states("a")
		p := NewProber(ProberConfig{Deadline: 5 * ms, HedgeAfter: time.Hour, Quorum: 1}, f, nil, nil)
		p.Run(context.Background(), a, nil)
		synctest.Wait()
		time.Sleep(slowHold - 5*ms - 1) // just before: still slow
		if res := p.Run(context.Background(), a, nil); res.SkippedSlow != 1 {
			t.Fatalf("Run = %+v, want skipped as slow", res)
		}
		synctest.Wait()
		time.Sleep(slowHold + 5*ms) // the background probe timed out at +5ms: now past its hold
		f.mu.Lock()
		f.delay["a"] = ms
		f.mu.Unlock()
		if res, want := p.Run(context.Background(), a, nil), (Result{Probed: 1, Answered: 1, Waited: ms}); res != want {
			t.Fatalf("Run = %+v, want %+v", res, want)
		}
	})
}

// TestProberHedgeSkipsSlowSpare: a hedge does not go to a spare whose
// probes are slow: it takes the next spare, and a Run whose candidates
// are all slow hedges at once.
func TestProberHedgeSkipsSlowSpare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeFetcher()
		f.delay["a"], f.delay["s1"], f.delay["s2"] = time.Hour, time.Hour, ms
		bs := states("a", "s1", "s2")
		a, s1, s2 := bs[0], bs[1], bs[2]
		p := NewProber(ProberConfig{Deadline: 5 * ms, HedgeAfter: 4 * ms, Hedges: 1, Quorum: 1}, f, nil, nil)
		// Mark a and s1 slow.
		p.Run(context.Background(), []*State{a, s1}, nil)
		synctest.Wait()
		res := p.Run(context.Background(), []*State{a}, []*State{s1, s2})
		if want := (Result{Probed: 1, Answered: 1, Hedged: 1, SkippedSlow: 2, SparesUsed: 2, Waited: ms}); res != want {
			t.Errorf("Run = %+v, want %+v", res, want)
		}
		time.Sleep(5 * ms) // let the background probes of a and s1 end
		synctest.Wait()
	})
}

// ctxFetcher records the deadline of each fetch's context, and when it
// ended and with what error (the fetch never answers: it returns at
// ctx.Done()).
type ctxFetcher struct {
	mu       sync.Mutex
	deadline map[string]time.Time
	ended    map[string]time.Time
	err      map[string]error
}

func (f *ctxFetcher) Fetch(ctx context.Context, s *State, _ Endpoint) (Load, error) {
	d, _ := ctx.Deadline()
	<-ctx.Done()
	f.mu.Lock()
	f.deadline[s.Addr()], f.ended[s.Addr()], f.err[s.Addr()] = d, time.Now(), ctx.Err()
	f.mu.Unlock()
	return Load{}, ctx.Err()
}

// TestProbeContext: the Fetcher's context has the deadline of the Run that
// sent it (a hedge: a full deadline from its send) and ends when its last
// waiter leaves, at the latest at its deadline.
func TestProbeContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &ctxFetcher{deadline: map[string]time.Time{}, ended: map[string]time.Time{}, err: map[string]error{}}
		p := NewProber(ProberConfig{Deadline: 5 * ms, HedgeAfter: 2 * ms, Hedges: 1, Quorum: 1}, f, nil, nil)
		t0 := time.Now()
		res := p.Run(context.Background(), states("a"), states("s"))
		if want := (Result{Probed: 2, Hedged: 1, TimedOut: 2, SparesUsed: 1, Waited: 5 * ms}); res != want {
			t.Errorf("Run = %+v, want %+v", res, want)
		}
		synctest.Wait()
		f.mu.Lock()
		// a ended at its deadline (by its timer or by the Run leaving at
		// the same instant, whichever ran first).
		if d, e, err := f.deadline["a"], f.ended["a"], f.err["a"]; !d.Equal(t0.Add(5*ms)) || !e.Equal(d) || err == nil {
			t.Errorf("a: deadline t0+%v (want 5ms), ended t0+%v, err %v", d.Sub(t0), e.Sub(t0), err)
		}
		// The hedge left at 2ms with its own 5ms; its only waiter left at
		// 5ms, so it was cancelled then.
		if d, e, err := f.deadline["s"], f.ended["s"], f.err["s"]; !d.Equal(t0.Add(7*ms)) || !e.Equal(t0.Add(5*ms)) || !errors.Is(err, context.Canceled) {
			t.Errorf("s: deadline t0+%v (want 7ms), ended t0+%v (want 5ms), err %v", d.Sub(t0), e.Sub(t0), err)
		}
		f.mu.Unlock()
	})
}

// TestProberHedgeJoinerKeepsItsDeadline: a Run that hedges into a probe
// another Run sent after it started (so that probe ends after this Run's
// deadline) still returns at its own deadline.
func TestProberHedgeJoinerKeepsItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeFetcher()
		f.delay["b"], f.delay["x"], f.delay["s"] = time.Hour, time.Hour, time.Hour
		bs := states("b", "x", "s")
		b, x, s := bs[0:1], bs[1:2], bs[2:3]
		pb := NewProber(ProberConfig{Deadline: 5 * ms, HedgeAfter: 2 * ms, Hedges: 1, Quorum: 1}, f, nil, nil)
		pa := NewProber(ProberConfig{Deadline: 5 * ms, HedgeAfter: ms, Hedges: 1, Quorum: 1}, f, nil, nil)
		var ra Result
		done := make(chan struct{})
		go func() {
			defer close(done)
			time.Sleep(ms / 2)
			ra = pa.Run(context.Background(), x, s) // hedges to s at 1.5ms: s's probe ends at 6.5ms
		}()
		rb := pb.Run(context.Background(), b, s) // hedges at 2ms: joins s's probe
		if want := (Result{Probed: 1, Coalesced: 1, Hedged: 1, TimedOut: 2, SparesUsed: 1, Waited: 5 * ms}); rb != want {
			t.Errorf("Run = %+v, want %+v", rb, want)
		}
		<-done
		if want := (Result{Probed: 2, Hedged: 1, TimedOut: 2, SparesUsed: 1, Waited: 5 * ms}); ra != want {
			t.Errorf("other Run = %+v, want %+v", ra, want)
		}
		if n := f.callsTo("s"); n != 1 {
			t.Errorf("%d probes of s, want 1", n)
		}
		synctest.Wait()
	})
}

// TestProberRecycledWaiterSeesNoStaleAnswer: answers that land after a
// Run left (a quorum loser, a probe past a caller's deadline) never reach
// the next Run, which recycles the same channel: each Run counts exactly
// its own answers and decides at its own time.
func TestProberRecycledWaiterSeesNoStaleAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeFetcher()
		f.delay["a"], f.delay["b"], f.delay["c"] = ms, 2*ms, 3*ms
		f.deaf["b"] = true // lands at 2ms whatever its context says
		bs := states("a", "b", "c")
		p := NewProber(ProberConfig{Deadline: 5 * ms, HedgeAfter: time.Hour, Quorum: 1}, f, nil, nil)
		for i := range 20 {
			r1 := p.Run(context.Background(), bs[:2], nil) // a at 1ms wins, b lands at 2ms
			if want := (Result{Probed: 2, Answered: 1, Cancelled: 1, Waited: ms}); r1 != want {
				t.Fatalf("round %d: Run = %+v, want %+v", i, r1, want)
			}
			r2 := p.Run(context.Background(), bs[2:], nil) // c at 3ms; b's answer lands at 1ms into it
			if want := (Result{Probed: 1, Answered: 1, Waited: 3 * ms}); r2 != want {
				t.Fatalf("round %d: Run = %+v, want %+v", i, r2, want)
			}
			synctest.Wait()
		}
	})
}

// TestProberJoinAllocatesNothing: a Run that joins a probe in flight (the
// common case under load) allocates nothing: its channel and timer are
// recycled and its deadline is the probe's.
func TestProberJoinAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop recycled waiters")
	}
	release := make(chan struct{})
	f := blockFetcher(release)
	a := states("a")
	p := NewProber(ProberConfig{Deadline: time.Hour, HedgeAfter: time.Hour, Quorum: 1}, f, nil, nil)
	first := make(chan Result)
	go func() { first <- p.Run(context.Background(), a, nil) }()
	for a[0].flight.Load() == nil {
		time.Sleep(time.Millisecond)
	}
	// A caller whose context has ended: it joins the flight and leaves.
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	var res Result
	// AllocsPerRun counts the whole process's mallocs: the least of three
	// keeps a stray allocation elsewhere from failing the test, while an
	// allocation in Run shows in all of them.
	allocs := testing.AllocsPerRun(200, func() { res = p.Run(gone, a, nil) })
	for i := 0; i < 2 && allocs > 0; i++ {
		allocs = min(allocs, testing.AllocsPerRun(200, func() { res = p.Run(gone, a, nil) }))
	}
	close(release)
	if r := <-first; r.Answered != 1 {
		t.Errorf("sender's Run = %+v", r)
	}
	if res.Coalesced != 1 || res.TimedOut != 1 {
		t.Fatalf("Run = %+v, want a join left at the caller's end", res)
	}
	if allocs != 0 {
		t.Errorf("a joining Run allocates %v times, want 0", allocs)
	}
}

// blockFetcher answers once release is closed.
type blockFetcher chan struct{}

func (f blockFetcher) Fetch(ctx context.Context, _ *State, _ Endpoint) (Load, error) {
	<-f
	return Unknown(time.Now(), SourceNone), nil
}
