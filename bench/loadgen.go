package bench

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// errNotSent marks requests a cancelled run never sent.
const errNotSent = "not sent: run cancelled"

// Targets maps a request to the base URL it is sent to.
type Targets struct {
	Proxies []string // one per replica
	Servers []string // for requests that bypass the proxies
}

func (t *Targets) url(r *Req) string {
	if r.Direct >= 0 && r.Direct < len(t.Servers) {
		return t.Servers[r.Direct]
	}
	return t.Proxies[r.Replica%len(t.Proxies)]
}

// Generate replays reqs open-loop: each request is sent at its scheduled
// time by its own goroutine, whatever happened to earlier ones (arrivals
// never wait for completions, as `vllm bench serve` sends them). It returns
// when every request has finished or ctx is done, one Outcome per request in
// order. perReq bounds each request. progress, if set, is called as requests
// complete.
func Generate(ctx context.Context, c *http.Client, t Targets, reqs []Req, perReq time.Duration, progress func()) []Outcome {
	out := make([]Outcome, len(reqs))
	var wg sync.WaitGroup
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for i := range reqs {
		r := &reqs[i]
		if d := time.Until(start.Add(r.At)); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-ctx.Done():
				for j := i; j < len(reqs); j++ {
					out[j] = Outcome{Index: j, Err: errNotSent, Direct: reqs[j].Direct >= 0, Replica: reqs[j].Replica, Step: reqs[j].Step}
				}
				wg.Wait()
				return out
			}
		}
		o := &out[i]
		o.Index, o.Direct, o.Replica, o.Step = i, r.Direct >= 0, r.Replica, r.Step
		o.Sent = time.Since(start)
		o.Lag = o.Sent - r.At
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx, cancel := context.WithTimeout(ctx, perReq)
			defer cancel()
			streamCompletion(rctx, c, t.url(r), r, o)
			if progress != nil {
				progress()
			}
		}()
	}
	wg.Wait()
	return out
}

// ClosedLoop runs conc workers that each send the next request as soon as
// their previous one finished, for dur, cycling through reqs. It returns the
// outcomes of requests that finished inside the window.
func ClosedLoop(ctx context.Context, c *http.Client, urls []string, reqs []Req, conc int, warm, dur time.Duration) []Outcome {
	ctx, cancel := context.WithTimeout(ctx, warm+dur+30*time.Second)
	defer cancel()
	start := time.Now()
	var mu sync.Mutex
	var next int
	var outs []Outcome
	var wg sync.WaitGroup
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < warm+dur && ctx.Err() == nil {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				r := reqs[i%len(reqs)]
				var o Outcome
				s := time.Since(start)
				o.Sent = s
				streamCompletion(ctx, c, urls[i%len(urls)], &r, &o)
				end := time.Since(start)
				if end >= warm && end <= warm+dur {
					mu.Lock()
					outs = append(outs, o)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return outs
}
