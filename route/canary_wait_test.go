package route

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	"github.com/probegate/probegate/breaker"
	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/probe"
)

// slowCanary is a fetcher whose canary completion answers status after
// delay (or fails at the canary's deadline, when that comes first), as a
// pod busy with a batch (200 late), a hung engine (never) or a dead one
// (500 at once) does. /v1/models answers at once.
type slowCanary struct {
	delay  time.Duration
	status int
	sent   atomic.Int64 // completions asked
}

func (f *slowCanary) Fetch(context.Context, *probe.State, probe.Endpoint) (probe.Load, error) {
	return probe.Load{}, context.Canceled
}

func (f *slowCanary) Send(ctx context.Context, _ *probe.State, req *fasthttp.Request, resp *fasthttp.Response) error {
	if string(req.URI().Path()) == "/v1/models" {
		resp.SetBodyString(`{"data":[{"id":"m"}]}`)
		return nil
	}
	f.sent.Add(1)
	select {
	case <-time.After(f.delay):
	case <-ctx.Done():
		return ctx.Err()
	}
	resp.SetStatusCode(f.status)
	return nil
}

// canaryRig is a Proxy with just what judgeServerError uses, one backend
// whose breaker opens at the first counted failure, and the first byte
// timeout (the canary's bound) at 60 s, the default.
func canaryRig(f *slowCanary) (*Proxy, *Backend, *settings) {
	p := &Proxy{log: zerolog.Nop(), now: time.Now, fetcher: f}
	p.metrics, _ = newMetrics(prometheus.NewRegistry(), p)
	b := &Backend{addr: "pod:8000", brk: breaker.New("pod:8000", config.Breaker{ConsecutiveFailures: 1, OpenFor: config.Duration(time.Hour), HalfOpenRequests: 1}, nil, nil)}
	return p, b, &settings{firstByte: 60 * time.Second}
}

// healthyExcuses reads probegate_breaker_excused_total{reason="healthy"}.
func healthyExcuses(p *Proxy) float64 {
	var m dto.Metric
	_ = p.metrics.excused[excuseHealthy].Write(&m)
	return m.GetCounter().GetValue()
}

// judge runs n concurrent 5xx answers through judgeServerError and returns
// how long each took to go to its client.
func judge(p *Proxy, b *Backend, rt *settings, n int) []time.Duration {
	took := make([]time.Duration, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			t, err := b.brk.Allow()
			if err != nil {
				panic(err)
			}
			start := time.Now()
			p.judgeServerError(rt, b, t)
			took[i] = time.Since(start)
		})
	}
	wg.Wait()
	return took
}

// A client's 5xx answer waits for the canary's verdict at most canaryWait,
// not first_byte_timeout (60 s); the verdict still decides the breaker
// outcome when it comes. A dead engine's canary fails at once, so its 5xx
// is counted before its client has it.
func TestCanaryWaitIsBounded(t *testing.T) {
	t.Run("healthy but busy pod: the 5xx goes out after canaryWait, excused later", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := &slowCanary{delay: 30 * time.Second, status: 200}
			p, b, rt := canaryRig(f)
			for i, d := range judge(p, b, rt, 6) {
				if d != canaryWait {
					t.Fatalf("5xx %d waited %v for the canary, want canaryWait %v", i, d, canaryWait)
				}
			}
			if got := healthyExcuses(p); got != 0 {
				t.Fatalf("excused{healthy} = %v before the canary answered", got)
			}
			time.Sleep(f.delay)
			synctest.Wait()
			if got := healthyExcuses(p); got != 6 {
				t.Fatalf("excused{healthy} = %v after the canary answered, want all 6 5xx", got)
			}
			if st := b.brk.State(); st != breaker.Closed {
				t.Fatalf("breaker %v after a busy pod answered its canary", st)
			}
			if got := f.sent.Load(); got != 1 {
				t.Fatalf("%d canaries for 6 concurrent 5xx, want 1", got)
			}
		})
	})
	t.Run("hung engine: the 5xx goes out after canaryWait, counted at the canary's timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := &slowCanary{delay: time.Hour, status: 200}
			p, b, rt := canaryRig(f)
			for i, d := range judge(p, b, rt, 3) {
				if d != canaryWait {
					t.Fatalf("5xx %d waited %v for the canary, want canaryWait %v", i, d, canaryWait)
				}
			}
			if st := b.brk.State(); st != breaker.Closed {
				t.Fatalf("breaker %v before the canary's verdict", st)
			}
			time.Sleep(rt.firstByte)
			synctest.Wait()
			if st := b.brk.State(); st != breaker.Open {
				t.Fatalf("breaker %v once the hung engine's canary timed out, want open", st)
			}
		})
	})
	t.Run("dead engine: counted before the client has its 5xx", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := &slowCanary{delay: 0, status: 500}
			p, b, rt := canaryRig(f)
			if d := judge(p, b, rt, 1)[0]; d != 0 {
				t.Fatalf("5xx waited %v for a canary that failed at once", d)
			}
			if st := b.brk.State(); st != breaker.Open {
				t.Fatalf("breaker %v when the dead engine's 5xx went out, want open", st)
			}
			synctest.Wait()
		})
	})
}

// pendingEntries returns the entries of b's canary round's pending list and
// the tickets they count.
func pendingEntries(b *Backend) (entries int, tickets int64) {
	r := b.canary.round.Load()
	if r == nil {
		return 0, 0
	}
	for e := r.pending.Load(); e != nil && e != roundSealed; e = e.next {
		entries++
		tickets += e.n.Load()
	}
	return entries, tickets
}

// A flood of 5xx answers during a slow canary (one pod, nothing to re-send
// to) leaves one pending entry per breaker state, not one per answer held
// until first_byte_timeout; the verdict still decides every one of them.
func TestCanaryPendingListIsBounded(t *testing.T) {
	const flood = 2000
	t.Run("healthy but busy pod: every 5xx excused", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := &slowCanary{delay: 30 * time.Second, status: 200}
			p, b, rt := canaryRig(f)
			judge(p, b, rt, flood)
			if e, n := pendingEntries(b); e != 1 || n != flood {
				t.Errorf("%d pending entries counting %d tickets after %d late 5xx, want 1 counting all", e, n, flood)
			}
			time.Sleep(f.delay)
			synctest.Wait()
			if got := healthyExcuses(p); got != flood {
				t.Fatalf("excused{healthy} = %v after the canary answered, want %d", got, flood)
			}
			if st := b.brk.State(); st != breaker.Closed {
				t.Fatalf("breaker %v after a busy pod answered its canary", st)
			}
		})
	})
	t.Run("hung engine: the held 5xx open the breaker at the verdict", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := &slowCanary{delay: time.Hour, status: 200}
			p, b, rt := canaryRig(f)
			judge(p, b, rt, flood)
			if e, n := pendingEntries(b); e != 1 || n != flood {
				t.Errorf("%d pending entries counting %d tickets after %d late 5xx, want 1 counting all", e, n, flood)
			}
			time.Sleep(rt.firstByte)
			synctest.Wait()
			if st := b.brk.State(); st != breaker.Open {
				t.Fatalf("breaker %v once the hung engine's canary timed out, want open", st)
			}
			if got := healthyExcuses(p); got != 0 {
				t.Fatalf("excused{healthy} = %v for a hung engine", got)
			}
		})
	})
	t.Run("5xx leaving as the verdict comes: each decided once", func(t *testing.T) {
		for range 20 {
			synctest.Test(t, func(t *testing.T) {
				// The canary answers at the instant the 5xx answers stop
				// waiting: leave races the round's seal.
				f := &slowCanary{delay: canaryWait, status: 200}
				p, b, rt := canaryRig(f)
				judge(p, b, rt, 200)
				synctest.Wait()
				if got := healthyExcuses(p); got != 200 {
					t.Fatalf("excused{healthy} = %v, want each of 200 5xx once", got)
				}
			})
		}
	})
	t.Run("half-open trial left to the verdict is freed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := &slowCanary{delay: 30 * time.Second, status: 200}
			p := &Proxy{log: zerolog.Nop(), now: time.Now, fetcher: f}
			p.metrics, _ = newMetrics(prometheus.NewRegistry(), p)
			b := &Backend{addr: "pod:8000", brk: breaker.New("pod:8000", config.Breaker{ConsecutiveFailures: 1, OpenFor: config.Duration(time.Second), HalfOpenRequests: 1}, nil, nil)}
			rt := &settings{firstByte: 60 * time.Second}
			tk, _ := b.brk.Allow()
			tk.Done(breaker.Failure) // open
			time.Sleep(2 * time.Second)
			judge(p, b, rt, 1) // the half-open trial answers 5xx
			if e, n := pendingEntries(b); e != 1 || n != 1 {
				t.Fatalf("%d pending entries counting %d tickets, want the trial", e, n)
			}
			if _, err := b.brk.Allow(); err == nil {
				t.Fatal("a second trial admitted while the first waits for its verdict")
			}
			time.Sleep(f.delay)
			synctest.Wait()
			tk, err := b.brk.Allow()
			if err != nil {
				t.Fatalf("trial slot still taken after the canary excused the trial's 5xx: %v", err)
			}
			tk.Done(breaker.Ignore)
		})
	})
}
