package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/probegate/probegate/internal/vllmsim"
	"github.com/probegate/probegate/probe"
	"github.com/probegate/probegate/route"
)

// Setup is the live system one run measures: the fleet, its faults and how
// many proxy replicas stand in front of it.
type Setup struct {
	Servers  int
	Sim      vllmsim.Config
	Faults   map[int]vllmsim.Faults // by server index
	Replicas int
	// History, when set, is the traffic the servers served before the
	// run (-pod-history): dealt over them in proportion to their speed
	// (vllmsim.DealHistory, the weights their Faults' slowdowns), each
	// share played through a private engine (vllmsim.RunHistory), and the
	// counters added to the server's /metrics (Server.SetHistory), as a
	// long-lived pod's. Empty: fresh servers, counters at 0.
	History []vllmsim.HistoryRequest
	// Records, when set, records where every request went and what the
	// fleet and its replica looked like then (RunResult.Records): each
	// request carries an X-Request-Id, and each server's SetOnArrival
	// hook snapshots the fleet. A diagnostic (-records): it reads every
	// server's state and the replica's backends on each arrival.
	Records bool
	// DialTimeout, when set, bounds the load generator's dials and is each
	// proxy's upstream.connect_timeout; zero keeps NewHTTPClient's 2 s and
	// the config's default. For tests that hold generator, proxies and pods
	// in one -race process on a shared machine, where a loopback dial can
	// wait seconds for a processor: a bench figure keeps the defaults.
	DialTimeout time.Duration
}

// RunResult is everything measured in one run of one strategy.
type RunResult struct {
	Strategy   string
	Outcomes   []Outcome
	Proxy      ProxyStats
	PerServer  []int64   // requests finished per server
	AvgQueue   []float64 // time-averaged running+waiting per server
	AdapterLds int64
	PrefixQ    int64
	PrefixH    int64
	Preempt    int64
	Wall       time.Duration // first send to last completion
	// SpeedRatios samples, every 20 ms and for each proxy, its learned
	// time per prefill token (route.load.learn_speed) of the last server
	// over the mean of the others', when both are learned: the slow one
	// over the rest in the hetero entries, noise around 1 elsewhere.
	SpeedRatios []float64
	// PodSpeedRatios is SpeedRatios for the pod-reported time per prefill
	// token (probe.State.PodNsPerToken, route.load.pod_speed).
	PodSpeedRatios []float64
	// Records are the run's ArrivalRecords when Setup.Records was set.
	Records []ArrivalRecord
}

// RunOne starts a fresh fleet and fresh proxies for strategy, replays reqs
// through them and tears everything down. The run is bounded: requests get
// perReq each and the whole run is cancelled by ctx.
func RunOne(ctx context.Context, su Setup, strategy string, reqs []Req, perReq time.Duration, progress func()) (*RunResult, error) {
	fleet, err := vllmsim.StartFleet(su.Servers, "127.0.0.1", 0, su.Sim)
	if err != nil {
		return nil, err
	}
	defer fleet.Close()
	servers := fleet.Servers()
	for i, f := range su.Faults {
		if i < len(servers) {
			servers[i].SetFaults(f)
		}
	}
	if err := setHistory(servers, su); err != nil {
		return nil, err
	}
	reps := max(su.Replicas, 1)
	var proxies []*ProxyInstance
	defer func() {
		var wg sync.WaitGroup
		for _, p := range proxies {
			wg.Add(1)
			go func() { defer wg.Done(); p.Stop() }()
		}
		wg.Wait()
	}()
	t := Targets{Servers: fleet.URLs()}
	for range reps {
		p, err := StartProxy(strategy, fleet, su.DialTimeout)
		if err != nil {
			return nil, fmt.Errorf("start proxy %s: %w", strategy, err)
		}
		proxies = append(proxies, p)
		t.Proxies = append(t.Proxies, p.URL)
	}
	c := NewHTTPClient()
	if su.DialTimeout > 0 {
		c = newHTTPClient(su.DialTimeout)
	}
	defer c.CloseIdleConnections()
	var arr *arrivals
	if su.Records {
		arr = newArrivals(strategy, reqs, proxies, fleet.URLs(), fleet.Addrs())
		reqs = arr.reqs
		for i, s := range servers {
			s.SetOnArrival(arr.hook(servers, i))
		}
	}

	// Sample each server's true queue to time-average it.
	sctx, stop := context.WithCancel(ctx)
	qsum := make([]float64, len(servers))
	var samples int
	var ratios, podRatios []float64
	// The pool orders backends by address: find the fleet's last server
	// (the slow one in the hetero entries) by its address.
	lastAddr := fleet.Addrs()[len(servers)-1]
	var sw sync.WaitGroup
	sw.Add(1)
	go func() {
		defer sw.Done()
		tk := time.NewTicker(20 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-tk.C:
				for i, s := range servers {
					st := s.State()
					qsum[i] += float64(st.Running + st.Waiting)
				}
				samples++
				for _, p := range proxies {
					if r, ok := speedRatio(p.P.Pool().Backends(), lastAddr, learnedNs); ok {
						ratios = append(ratios, r)
					}
					if r, ok := speedRatio(p.P.Pool().Backends(), lastAddr, (*probe.State).PodNsPerToken); ok {
						podRatios = append(podRatios, r)
					}
				}
			}
		}
	}()
	start := time.Now()
	outs := Generate(ctx, c, t, reqs, perReq, progress)
	wall := time.Since(start)
	stop()
	sw.Wait()

	rr := &RunResult{Strategy: strategy, Outcomes: outs, Wall: wall, SpeedRatios: ratios, PodSpeedRatios: podRatios}
	if arr != nil {
		for _, s := range servers {
			s.SetOnArrival(nil)
		}
		rr.Records = arr.finish(outs)
	}
	for _, p := range proxies {
		ps, err := ReadProxyStats(p.P.Gatherer())
		if err != nil {
			return nil, err
		}
		rr.Proxy.Add(ps)
	}
	for i, s := range servers {
		st := s.State()
		rr.PerServer = append(rr.PerServer, st.Finished)
		rr.AdapterLds += st.AdapterLoads
		rr.PrefixQ += st.PrefixQueries
		rr.PrefixH += st.PrefixHits
		rr.Preempt += st.Preemptions
		if samples > 0 {
			rr.AvgQueue = append(rr.AvgQueue, qsum[i]/float64(samples))
		} else {
			rr.AvgQueue = append(rr.AvgQueue, 0)
		}
	}
	return rr, nil
}

// MeasureCapacity saturates a fresh fleet closed-loop, straight to the
// servers (round robin over them, 2x their batch seats in flight so every
// server always has a queue), and returns the completed requests per
// second: the fleet's capacity for this workload.
func MeasureCapacity(ctx context.Context, su Setup, reqs []Req, warm, dur time.Duration) (float64, error) {
	fleet, err := vllmsim.StartFleet(su.Servers, "127.0.0.1", 0, su.Sim)
	if err != nil {
		return 0, err
	}
	defer fleet.Close()
	c := NewHTTPClient()
	defer c.CloseIdleConnections()
	seats := su.Sim.MaxNumSeqs
	if seats <= 0 {
		seats = vllmsim.DefaultConfig().MaxNumSeqs
	}
	conc := su.Servers * seats * 2
	outs := ClosedLoop(ctx, c, fleet.URLs(), reqs, conc, warm, dur)
	ok := 0
	for i := range outs {
		if outs[i].OK() {
			ok++
		}
	}
	if ok == 0 {
		return 0, fmt.Errorf("capacity: no request completed (%d outcomes)", len(outs))
	}
	return float64(ok) / dur.Seconds(), nil
}

// learnedNs is a backend's learned time per prefill token.
func learnedNs(st *probe.State) float64 {
	_, _, ns := st.Work()
	return ns
}

// speedRatio returns the time per prefill token (nsOf: learned or
// pod-reported) of the backend of bs at addr over the mean of the others',
// and false while that one or none of the others is known (or addr is not
// in bs).
func speedRatio(bs []*route.Backend, addr string, nsOf func(*probe.State) float64) (float64, bool) {
	last, sum, n, found := 0.0, 0.0, 0, false
	for _, b := range bs {
		ns := nsOf(b.State())
		switch {
		case b.State().Addr() == addr:
			last, found = ns, true
		case ns > 0:
			sum += ns
			n++
		}
	}
	if !found {
		return 0, false
	}
	if last <= 0 || n == 0 {
		return 0, false
	}
	return last / (sum / float64(n)), true
}

// setHistory gives every server its share of su.History (see Setup).
func setHistory(servers []*vllmsim.Server, su Setup) error {
	if len(su.History) == 0 {
		return nil
	}
	weights := make([]float64, len(servers))
	for i := range servers {
		weights[i] = max(su.Faults[i].Slowdown, 1)
	}
	for i, share := range vllmsim.DealHistory(su.History, weights, false) {
		st, err := vllmsim.RunHistory(servers[i].Config(), weights[i], share)
		if err != nil {
			return err
		}
		servers[i].SetHistory(st)
	}
	return nil
}
