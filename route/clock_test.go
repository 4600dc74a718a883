package route

import (
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/probe"
)

// TestOneClockStampsEveryReport: Options.Now is the one clock of the load
// reports. Scrapes and probes are stamped by it (State.Report orders
// reports of every source by At, so a scrape stamped by another clock could
// overwrite a newer probe, or never be replaced). The clock here runs in
// 2031: a report stamped with time.Now would be five years off.
func TestOneClockStampsEveryReport(t *testing.T) {
	t0 := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	var ticks atomic.Int64
	now := func() time.Time { return t0.Add(time.Duration(ticks.Add(1)) * time.Microsecond) }
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/load" {
			_, _ = io.WriteString(w, `{"server_load": 2}`)
			return
		}
		_, _ = io.WriteString(w, `{"id":"x"}`)
	})
	for _, c := range []struct {
		policy string
		source probe.Source
	}{{config.PolicyCached, probe.SourceScrape}, {config.PolicyProbe, probe.SourceProbe}} {
		t.Run(c.policy, func(t *testing.T) {
			cfg := testConfig(up.URL)
			cfg.Route.Policy = c.policy
			cfg.Probe.Endpoint = config.EndpointLoad
			cfg.Probe.FreshFor = 0 // probe on every request
			cfg.Probe.ORCA = false
			// The test is about the clock, not the deadline: a generous one
			// keeps a loaded machine from turning the probe into a fallback.
			cfg.Probe.Deadline = config.Duration(time.Second)
			tp := startProxy(t, cfg, func(o *Options) { o.Now = now })
			st := tp.Pool().Backends()[0].State()
			deadline := time.Now().Add(5 * time.Second)
			for {
				if c.source == probe.SourceProbe {
					// Each request probes (fresh_for 0); one is enough unless
					// its probe missed the deadline.
					resp := post(t, tp.url("/v1/completions"), `{"model":"m","prompt":"hi"}`)
					resp.Body.Close()
				}
				if l := st.Latest(); l != nil && l.Source == c.source {
					if at := l.At; at.Before(t0) || at.After(t0.Add(time.Hour)) {
						t.Fatalf("%v report stamped %v, want a time of the injected clock (from %v)", c.source, at, t0)
					}
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("no %v report within 5s (latest %+v)", c.source, st.Latest())
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
}
