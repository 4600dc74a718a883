package probe

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
)

// paceRun drives one scrape loop's rule in virtual time for span: this
// proxy sends the pod one request every every (none if 0), each finished
// at once, and other clients' requests at the pod alternate between 0 and
// 3 every 37 ms. It returns the scrapes and the requests sent.
func paceRun(c ScrapeConfig, span, every time.Duration) (scrapes int, sent uint64) {
	p := newPace(c, 0)
	var t time.Duration
	for t < span {
		el := p.interval
		t += el
		if every > 0 {
			sent = uint64(t / every)
		}
		foreign := 3 * int(t/(37*ms)%2)
		p.next(c, el, sent, 0, foreign)
		scrapes++
	}
	return scrapes, sent
}

// TestPaceForeignBudget: with scrape.foreign_budget K, the scrapes the
// foreign pace adds to the own pace's are at most K per request this proxy
// sent the pod (plus the credit one may hold at the start of a span, K x
// RequestsPerScrape, and the back-off's scrapes after each spell), however
// fast other clients change it; within that the foreign pace still runs
// (at least half of the budget, or of what it adds unbounded, is spent); a lone proxy's pod (no foreign change)
// is scraped exactly as without a budget. Without the budget the same pod
// is scraped at MinInterval, 20 times a second.
func TestPaceForeignBudget(t *testing.T) {
	base := ScrapeConfig{Interval: time.Second, MinInterval: 50 * ms, MaxInterval: time.Second, Adaptive: true, ForeignChange: 0.1}
	own := base
	own.ForeignChange = 0
	const span = 10 * time.Minute
	for _, every := range []time.Duration{10 * time.Second, time.Second, 100 * ms} {
		for _, k := range []float64{2, 10} {
			t.Run(fmt.Sprintf("one request per %v, budget %v", every, k), func(t *testing.T) {
				c := base
				c.ForeignBudget = k
				got, sent := paceRun(c, span, every)
				ownPace, _ := paceRun(own, span, every)
				free, _ := paceRun(base, span, every)
				added := float64(got - ownPace)
				// The back-off after a spell: at most log2(1s/50ms) < 5
				// scrapes, one spell per request at most.
				bound := k*float64(sent) + k*RequestsPerScrape + 5*float64(sent)
				if added > bound {
					t.Errorf("%d scrapes against the own pace's %d: %v added for %d requests, want at most %v", got, ownPace, added, sent, bound)
				}
				// What the foreign pace adds unbounded, or the budget if less.
				want := min(float64(free-ownPace), k*float64(sent))
				if added < want/2 {
					t.Errorf("%v scrapes added for %d requests at budget %v (%v without it), want at least %v", added, sent, k, free-ownPace, want/2)
				}
				if free < 19*int(span/time.Second) {
					t.Errorf("without the budget: %d scrapes in %v, want about 20 a second", free, span)
				}
			})
		}
	}
	// A lone proxy: the pod's queue is this proxy's own: identical.
	lone := func(c ScrapeConfig) []time.Duration {
		p := newPace(c, 0)
		var out []time.Duration
		for i := range 400 {
			disp := uint64(i * i % 97)
			out = append(out, p.next(c, p.interval, uint64(i)*3+disp%2, int(disp%5), int(disp%5)))
		}
		return out
	}
	c := base
	c.ForeignBudget = 2
	a, b := lone(base), lone(c)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("lone proxy, scrape %d: interval %v with the budget, %v without", i, b[i], a[i])
		}
	}
}

// TestScraperForeignBudget: the production loop applies the budget. Other
// clients change the pod 27 times a second for a minute while this proxy
// sends it one request every 2 s: budget 4 adds at most 4 scrapes per
// request (plus the start's credit and the back-offs) to the own pace's
// one a second, where foreign_change alone scrapes it every 50 ms.
func TestScraperForeignBudget(t *testing.T) {
	for _, budget := range []float64{4, 0} {
		t.Run(fmt.Sprintf("foreign_budget %v", budget), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &foreignFetcher{start: time.Now(), foreign: func(d time.Duration) int { return 2 * int(d/(37*ms)%2) }}
				obs := newCountObserver()
				cfg := ScrapeConfig{Interval: time.Second, MinInterval: 50 * ms, MaxInterval: time.Second, Timeout: time.Second, Adaptive: true, ForeignChange: 0.1, ForeignBudget: budget}
				sc := NewScraper(cfg, f, EndpointMetrics, obs, zerolog.Nop(), nil)
				defer sc.Close()
				s := NewState("b")
				sc.Add(s)
				time.Sleep(7 * ms) // off the scrapes' instants
				const sent = 30
				for range sent {
					s.Dispatch()
					s.Finish()
					time.Sleep(2 * time.Second)
				}
				n := obs.scrape(OutcomeOK)
				if budget > 0 {
					// Own pace: 60 scrapes in 60 s.
					bound := 61 + int(budget)*sent + int(budget)*RequestsPerScrape + 5*sent
					if n > bound || n < 61+sent*int(budget)/2 {
						t.Errorf("%d scrapes in 60 s for %d requests, want between %d and %d", n, sent, 61+sent*int(budget)/2, bound)
					}
				} else if n < 1000 {
					t.Errorf("no budget: %d scrapes in 60 s, want about 1,200 (every 50 ms)", n)
				}
			})
		})
	}
}
