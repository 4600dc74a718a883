package probe

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/probegate/probegate/internal/config"
)

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (o *countObserver) lastInterval(addr string) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	iv := o.interval[addr]
	if len(iv) == 0 {
		return 0
	}
	return iv[len(iv)-1]
}

func (o *countObserver) scrape(outcome string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.scrapes[outcome]
}

// ScrapeConfigFrom converts and nothing else: the defaults are
// internal/config's, never the probe package's.
func TestScrapeConfigFrom(t *testing.T) {
	d := config.Default().Scrape
	got := ScrapeConfigFrom(d)
	want := ScrapeConfig{Interval: d.Interval.D(), MinInterval: d.MinInterval.D(), MaxInterval: d.MaxInterval.D(), Timeout: d.Timeout.D(), Adaptive: d.Adaptive, StaleAfter: d.StaleAfter.D(), ForeignChange: d.ForeignChange, ForeignBudget: d.ForeignBudget}
	if got != want {
		t.Errorf("ScrapeConfigFrom(config.Default().Scrape) = %+v, want %+v", got, want)
	}
	if got := ScrapeConfigFrom(config.Scrape{}); got != (ScrapeConfig{}) {
		t.Errorf("a zero section must convert to zeros (no second set of defaults), got %+v", got)
	}
}

func TestNextInterval(t *testing.T) {
	c := ScrapeConfig{Interval: time.Second, MinInterval: 50 * ms, MaxInterval: 5 * time.Second}
	tests := []struct {
		cur  time.Duration
		rate float64
		want time.Duration
	}{
		{time.Second, 0, 2 * time.Second},        // idle: slow down, at most 2x per scrape
		{4 * time.Second, 0, 5 * time.Second},    // ... up to MaxInterval
		{time.Second, 8, time.Second},            // one scrape per 8 requests
		{time.Second, 80, 100 * ms},              // busy: speed up at once
		{time.Second, 1e6, 50 * ms},              // ... down to MinInterval
		{100 * ms, 1, 200 * ms},                  // load drops: back off gradually
		{5 * time.Second, 1e-9, 5 * time.Second}, // tiny rate does not overflow
		{50 * ms, 40, 100 * ms},                  // 40 rps -> 200ms, but at most 2x per step
		{150 * ms, 40, 200 * ms},
	}
	for _, tt := range tests {
		if got := c.nextInterval(tt.cur, tt.rate); got != tt.want {
			t.Errorf("nextInterval(%v, %v) = %v, want %v", tt.cur, tt.rate, got, tt.want)
		}
	}
}

// TestScraperAdaptive: the interval speeds up while this proxy sends the
// backend many requests and slows down when it goes idle.
func TestScraperAdaptive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeFetcher()
		f.delay["b"] = ms
		obs := newCountObserver()
		sc := NewScraper(ScrapeConfig{Interval: time.Second, MinInterval: 50 * ms, MaxInterval: 5 * time.Second, Timeout: time.Second, Adaptive: true},
			f, EndpointMetrics, obs, zerolog.Nop(), nil)
		defer sc.Close()
		s := NewState("b")
		sc.Add(s)
		sc.Add(s) // twice: still one loop
		if sc.Len() != 1 {
			t.Fatalf("Len = %d", sc.Len())
		}
		time.Sleep(10 * ms)
		if l := s.Latest(); l == nil || l.Source != SourceScrape {
			t.Fatalf("first scrape not at once: %+v", l)
		}

		// 400 requests/s for 5 s: 8/400 = 20ms, clamped to 50ms.
		for range 2000 {
			s.Dispatch()
			time.Sleep(2500 * time.Microsecond)
			s.Finish()
		}
		if got := obs.lastInterval("b"); got != 50*ms {
			t.Errorf("busy interval = %v, want 50ms", got)
		}
		// 40 requests/s: 200ms.
		for range 200 {
			s.Dispatch()
			time.Sleep(25 * ms)
			s.Finish()
		}
		if got := obs.lastInterval("b"); got < 150*ms || got > 250*ms {
			t.Errorf("moderate interval = %v, want about 200ms", got)
		}
		// Idle for 30 s: MaxInterval.
		time.Sleep(30 * time.Second)
		if got := obs.lastInterval("b"); got != 5*time.Second {
			t.Errorf("idle interval = %v, want 5s", got)
		}
		if n := obs.scrape(OutcomeOK); n < 80 {
			t.Errorf("only %d scrapes", n)
		}
	})
}

// TestScraperFixed: without Adaptive the interval stays put.
func TestScraperFixed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeFetcher()
		obs := newCountObserver()
		sc := NewScraper(ScrapeConfig{Interval: 100 * ms, Timeout: time.Second}, f, EndpointLoad, obs, zerolog.Nop(), nil)
		s := NewState("b")
		sc.Add(s)
		time.Sleep(time.Second + ms)
		sc.Close()
		if n := obs.scrape(OutcomeOK); n != 11 {
			t.Errorf("%d scrapes in 1s at 100ms, want 11", n)
		}
		if got := obs.lastInterval("b"); got != 100*ms {
			t.Errorf("interval %v", got)
		}
	})
}

// TestScraperHangingBackend: scrapes of a backend that never answers time
// out after Timeout; failing and recovery are logged once each.
func TestScraperHangingBackend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeFetcher()
		f.delay["h"] = time.Hour
		obs := newCountObserver()
		var logs syncBuffer
		sc := NewScraper(ScrapeConfig{Interval: 100 * ms, Timeout: 30 * ms}, f, EndpointMetrics, obs, zerolog.New(&logs), nil)
		defer sc.Close()
		s := NewState("h")
		sc.Add(s)
		time.Sleep(time.Second)
		// A scrape every 130ms (30ms timeout + 100ms interval).
		if n := obs.scrape(OutcomeTimeout); n < 7 || n > 8 {
			t.Errorf("%d timeouts in 1s, want 7-8", n)
		}
		if s.Latest() != nil {
			t.Error("a timed-out scrape reported")
		}
		f.mu.Lock()
		f.delay["h"] = ms
		f.mu.Unlock()
		time.Sleep(500 * ms)
		if s.Latest() == nil || obs.scrape(OutcomeOK) == 0 {
			t.Error("no scrape after recovery")
		}
		out := logs.String()
		if c := strings.Count(out, "scrape failing"); c != 1 {
			t.Errorf("failing logged %d times:\n%s", c, out)
		}
		if c := strings.Count(out, "scrape recovered"); c != 1 {
			t.Errorf("recovery logged %d times:\n%s", c, out)
		}
	})
}

// TestScraperRemoveAndClose: Remove stops one loop, Close stops the rest
// and waits; Add after Close does nothing.
func TestScraperRemoveAndClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeFetcher()
		f.delay["slow"] = time.Hour // Close must not wait for the hour
		sc := NewScraper(ScrapeConfig{Interval: 10 * ms, Timeout: time.Second}, f, EndpointMetrics, nil, zerolog.Nop(), nil)
		a, b, slow := NewState("a"), NewState("b"), NewState("slow")
		sc.Add(a)
		sc.Add(b)
		sc.Add(slow)
		time.Sleep(50 * ms)
		sc.Remove(a)
		sc.Remove(a) // twice: harmless
		synctest.Wait()
		before := countCalls(f, "a")
		time.Sleep(100 * ms)
		if after := countCalls(f, "a"); after != before {
			t.Errorf("removed backend scraped %d more times", after-before)
		}
		start := time.Now()
		sc.Close()
		sc.Close()
		if el := time.Since(start); el != 0 {
			t.Errorf("Close took %v", el)
		}
		if n := f.active.Load(); n != 0 {
			t.Errorf("%d fetches still running after Close", n)
		}
		sc.Add(NewState("late"))
		if sc.Len() != 0 {
			t.Error("Add after Close started a loop")
		}
	})
}

func countCalls(f *fakeFetcher, addr string) int {
	n := 0
	for _, c := range f.called() {
		if c == addr {
			n++
		}
	}
	return n
}

// TestScraperLoopback scrapes a real fasthttp server over loopback.
func TestScraperLoopback(t *testing.T) {
	s := loopbackServer(t, 0)
	f := &HTTPFetcher{}
	t.Cleanup(func() { f.Forget(s) })
	sc := NewScraper(ScrapeConfig{Interval: time.Second, Timeout: time.Second}, f, EndpointMetrics, nil, zerolog.Nop(), nil)
	sc.Add(s)
	deadline := time.Now().Add(2 * time.Second)
	for s.Latest() == nil && time.Now().Before(deadline) {
		time.Sleep(ms)
	}
	sc.Close()
	if l := s.Latest(); l == nil || l.Running != 12 || l.Source != SourceScrape {
		t.Fatalf("latest = %+v", l)
	}
}

func TestUpdateRate(t *testing.T) {
	tests := []struct {
		name    string
		prev, r float64
		want    float64
	}{
		{"first period takes the rate", -1, 40, 40},
		{"later periods average with weight one half", 40, 20, 30},
		{"an idle period halves the average", 30, 0, 15},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := UpdateRate(tt.prev, tt.r); got != tt.want {
				t.Errorf("UpdateRate(%v, %v) = %v, want %v", tt.prev, tt.r, got, tt.want)
			}
		})
	}
}

// TestPaceNext: the adaptive rule follows the larger of this proxy's own
// rate and the other clients' pace of change; the pod's queue that this
// proxy's own in-flight requests explain is not counted as foreign.
func TestPaceNext(t *testing.T) {
	c := ScrapeConfig{Interval: time.Second, MinInterval: 50 * ms, MaxInterval: time.Second, Adaptive: true, ForeignChange: 0.5}
	type step struct {
		disp            uint64
		inflight, queue int
		want            time.Duration
	}
	tests := []struct {
		name  string
		c     ScrapeConfig
		steps []step // one scrape every 500 ms
	}{
		{"idle pod: max interval", c, []step{{0, 0, 0, time.Second}, {0, 0, 0, time.Second}, {0, 0, 0, time.Second}}},
		{"lone proxy: its own in-flight requests are not foreign", c, []step{
			{0, 0, 0, time.Second}, {1, 1, 1, time.Second}, {2, 0, 0, time.Second}, {3, 1, 1, time.Second}}},
		// F goes 0, 4, 12: 8 then 16 changes/s; 0.5 / 8 = 62.5ms, and
		// 0.5 / 12 (the average over the periods) = 41.7ms -> 50ms.
		{"other clients change the pod: faster", c, []step{
			{0, 0, 0, time.Second}, {0, 0, 4, 62500 * time.Microsecond}, {0, 0, 12, 50 * ms}}},
		// This proxy's request is counted at the pod too: the foreign
		// queue is 3 - 1 = 2, a change of 2 in 0.5 s.
		{"own in-flight subtracted", c, []step{{0, 0, 0, time.Second}, {1, 1, 3, 125 * ms}}},
		{"off: own rate alone", ScrapeConfig{Interval: time.Second, MinInterval: 50 * ms, MaxInterval: time.Second, Adaptive: true}, []step{
			{0, 0, 0, time.Second}, {0, 0, 4, time.Second}, {0, 0, 0, time.Second}}},
		// A failed scrape (queue -1) neither counts a change nor forgets
		// the last foreign queue.
		{"failed scrape keeps the foreign rate", c, []step{
			{0, 0, 0, time.Second}, {0, 0, 2, 125 * ms}, {0, 0, -1, 125 * ms}, {0, 0, 2, 250 * ms}}},
		// Foreign change stops: the interval at most doubles per scrape.
		{"calm again: back off gradually", c, []step{
			{0, 0, 0, time.Second}, {0, 0, 4, 62500 * time.Microsecond}, {0, 0, 4, 125 * ms}, {0, 0, 4, 250 * ms}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPace(tt.c, 0)
			for i, s := range tt.steps {
				if got := p.next(tt.c, 500*ms, s.disp, s.inflight, s.queue); got != s.want {
					t.Fatalf("scrape %d (%+v): interval %v, want %v", i, s, got, s.want)
				}
			}
		})
	}
}

// foreignFetcher answers like a pod that holds this proxy's in-flight
// requests plus what other clients keep there: foreign(t), t since start.
type foreignFetcher struct {
	start   time.Time
	foreign func(time.Duration) int
}

func (f *foreignFetcher) Fetch(_ context.Context, s *State, _ Endpoint) (Load, error) {
	l := Unknown(time.Now(), SourceNone)
	l.Running, l.Waiting = s.Inflight()+f.foreign(time.Since(f.start)), 0
	return l, nil
}

// TestScraperForeignPace: behind many replicas, a pod other clients keep
// changing is scraped at their pace, though this proxy sends it nothing;
// when they stop, or when the only change is this proxy's own traffic (a
// lone proxy), it is scraped at MaxInterval again.
func TestScraperForeignPace(t *testing.T) {
	for _, fc := range []float64{1, 0} {
		t.Run(fmt.Sprintf("foreign_change %v", fc), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// Others add a request every 70 ms up to 10 and then
				// drain them the same way (14.3 changes/s) for 3 s; then
				// the pod holds 5 of theirs and nothing changes.
				f := &foreignFetcher{start: time.Now(), foreign: func(d time.Duration) int {
					if d >= 3*time.Second {
						return 5
					}
					k := int(d/(70*ms)) % 20
					return min(k, 20-k)
				}}
				obs := newCountObserver()
				cfg := ScrapeConfig{Interval: time.Second, MinInterval: 50 * ms, MaxInterval: time.Second, Timeout: time.Second, Adaptive: true, ForeignChange: fc}
				sc := NewScraper(cfg, f, EndpointMetrics, obs, zerolog.Nop(), nil)
				defer sc.Close()
				s := NewState("b")
				sc.Add(s)
				time.Sleep(2900 * ms)
				busy := obs.lastInterval("b")
				n := obs.scrape(OutcomeOK)
				if fc > 0 {
					// 1 / 14.3 per s = 70 ms once the average has caught up.
					if busy > 150*ms || n < 15 {
						t.Errorf("others change the pod 14 times/s: interval %v after %d scrapes in 2.9 s, want <= 150ms and >= 15 scrapes", busy, n)
					}
				} else if busy != time.Second || n > 3 {
					t.Errorf("foreign_change 0: interval %v after %d scrapes, want 1s (own rate alone)", busy, n)
				}
				time.Sleep(10 * time.Second)
				if got := obs.lastInterval("b"); got != time.Second {
					t.Errorf("others stopped changing the pod: interval %v, want MaxInterval 1s", got)
				}
			})
		})
	}
}

// TestScraperLoneProxyKeepsItsPace: a pod that only this proxy uses shows
// in its queue exactly this proxy's in-flight requests. However much they
// swing, the foreign rule adds no scrape: at 2 requests/s the interval
// stays at MaxInterval (RequestsPerScrape / 2 = 4 s, clamped to 1 s).
func TestScraperLoneProxyKeepsItsPace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &foreignFetcher{start: time.Now(), foreign: func(time.Duration) int { return 0 }}
		obs := newCountObserver()
		cfg := ScrapeConfig{Interval: time.Second, MinInterval: 50 * ms, MaxInterval: time.Second, Timeout: time.Second, Adaptive: true, ForeignChange: 0.1}
		sc := NewScraper(cfg, f, EndpointMetrics, obs, zerolog.Nop(), nil)
		defer sc.Close()
		s := NewState("b")
		sc.Add(s)
		// Every 2.5 s, 5 requests start together and end 1 s later
		// (the queue swings 0 -> 5 -> 0). Off the scrapes' instants.
		time.Sleep(5 * ms)
		for range 4 {
			for range 5 {
				s.Dispatch()
			}
			time.Sleep(time.Second)
			for range 5 {
				s.Finish()
			}
			time.Sleep(1500 * ms)
		}
		if n := obs.scrape(OutcomeOK); n > 11 {
			t.Errorf("%d scrapes in 10 s of own traffic alone, want <= 11 (one a second)", n)
		}
		if got := obs.lastInterval("b"); got != time.Second {
			t.Errorf("interval %v, want 1s", got)
		}
	})
}
