package route

import (
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/probegate/probegate/breaker"
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

// TestBreakerFollowsTheProxyClock: Options.Now decides when a backend's
// breaker may half-open. open_for is a nanosecond and the injected clock
// stands still, so a breaker that read the wall clock would half-open at
// once; on the proxy's clock it stays open (clients get 503 without the
// backend being asked) until that clock moves.
func TestBreakerFollowsTheProxyClock(t *testing.T) {
	var healthy atomic.Bool
	var hits atomic.Int64
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if !isCanary(r) { // the proxy's canary fails with the rest
			hits.Add(1)
		}
		if !healthy.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, `{"id":"x"}`)
	})
	t0 := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	var offset atomic.Int64
	now := func() time.Time { return t0.Add(time.Duration(offset.Load())) }
	cfg := testConfig(up.URL)
	cfg.Breaker.OpenFor = config.Duration(time.Nanosecond)
	tp := startProxy(t, cfg, func(o *Options) { o.Now = now })
	send := func() int {
		resp := post(t, tp.url("/v1/completions"), `{"model":"m","prompt":"hi"}`)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for i := range cfg.Breaker.ConsecutiveFailures {
		if got := send(); got != http.StatusInternalServerError {
			t.Fatalf("request %d: status %d, want the upstream's 500", i, got)
		}
	}
	healthy.Store(true)
	before := hits.Load()
	for i := range 5 { // real time passes; the proxy's clock does not
		if got := send(); got != http.StatusServiceUnavailable {
			t.Fatalf("request %d with the breaker open: status %d, want 503", i, got)
		}
	}
	if n := hits.Load() - before; n != 0 {
		t.Fatalf("the upstream saw %d requests while its breaker was open", n)
	}
	offset.Add(int64(2 * time.Nanosecond))
	if got := send(); got != http.StatusOK {
		t.Fatalf("after the proxy's clock passed open_for: status %d, want 200 (the half-open trial)", got)
	}
	if s := tp.Pool().Backends()[0].brk.State(); s != breaker.Closed {
		t.Fatalf("breaker %v after a successful trial, want closed", s)
	}
}

// A forwarded request reads the proxy's clock five times (each a vDSO
// call): the start, the decision's two ends (the second also stamps the
// send: its token work and the first-byte timeout's progress check), the
// head's arrival (the first byte's latency; also the time of an ORCA
// report in it) and the end. least_inflight's pick reads no clock of its
// own, so these are the forwarding path's.
func TestForwardedRequestReadsTheClockFiveTimes(t *testing.T) {
	be := startRawBackend(t, okResponder(""))
	var reads atomic.Int64
	var counting atomic.Bool
	tp := startProxy(t, testConfig(be.url()), func(o *Options) {
		o.Now = func() time.Time {
			if counting.Load() {
				reads.Add(1)
			}
			return time.Now()
		}
	})
	req := "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
	rawDo(t, tp.addr, req) // dials the backend
	counting.Store(true)
	r := rawDo(t, tp.addr, req)
	counting.Store(false)
	if r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	if n := reads.Load(); n != 5 {
		t.Errorf("one request read the clock %d times, want 5", n)
	}
}
