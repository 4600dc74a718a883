// Package fleetsim is a deterministic discrete-event simulation, in virtual
// time and one goroutine, of a fleet of N simulated vLLM pods behind R
// probegate replicas. Each pod is the project's own engine
// (internal/vllmsim.Engine, pure and goroutine-free); each replica routes
// with the production pickers (route.NewPicker over route.Backend and
// probe.State), the production adaptive scrape rule and hedge estimator, and
// a virtual-time Prober that follows probe.Prober's contract. Sockets are
// replaced by the network model of Params.
//
// Nothing here reads the wall clock or starts a goroutine while simulating:
// the same Config and seed give the same results, byte for byte.
package fleetsim

import (
	"math"
	"math/rand/v2"
	"time"
)

// Params is the model of everything between the replicas and the pods that a
// live run gets from sockets. Every parameter of the network and of the pods'
// load-report endpoints lives here, in one table (bench/README.md repeats it):
//
//	parameter        default   meaning
//	RTT              200µs     proxy <-> pod round trip (in-cluster); half each way
//	ProbeService     300µs     pod time to answer one probe, median of a lognormal
//	ProbeSigma       0.6       lognormal shape of ProbeService
//	ProbeTailP       0.01      probability that a probe also hits the tail
//	ProbeTail        8ms       extra delay of a tail probe (GC pause, busy API server)
//	ScrapeRender     3ms       pod time to render one /metrics scrape (~30 KB)
//	ScrapeBytes      30000     bytes of one /metrics answer (scrape)
//	ProbeBytes       30000     bytes of one probe answer (probe.endpoint metrics)
//	ORCABytes        120       bytes of one endpoint-load-metrics header
//	StreamShare      1.0       share of streaming requests (ORCA only on the rest)
//	ProxyOverhead    150µs     proxy time from request arrival to forward, probes excluded
//	Relay            50µs      proxy time to relay one frame back to the client
//	StuckProbePods   0         pods (the last ones) whose load endpoint is stuck:
//	                           every probe to them takes StuckProbeDelay more
//	StuckProbeDelay  50ms      (scrapes and requests are served as usual)
//	SpeedJitter      0         mean extra delay (exponential) with which a
//	SpeedJitterP     0         share SpeedJitterP of first bytes reach the
//	                           replica's speed sample (not the client): the
//	                           scheduling delays of a shared machine, as noise
//	                           on the learned speed (route.load.learn_speed)
//
// A probe's answer describes the pod as it is when the probe is sent (the pod
// changes only at engine step boundaries, 6-15 ms apart, and on arrivals; the
// error is at most RTT/2). A scrape's answer describes the pod when it reaches
// it, and arrives RTT + ScrapeRender later.
type Params struct {
	RTT           time.Duration
	ProbeService  time.Duration
	ProbeSigma    float64
	ProbeTailP    float64
	ProbeTail     time.Duration
	ScrapeRender  time.Duration
	ScrapeBytes   int
	ProbeBytes    int
	ORCABytes     int
	StreamShare   float64
	ProxyOverhead time.Duration
	Relay         time.Duration
	// StuckProbePods is how many pods, the last ones, answer every probe
	// StuckProbeDelay late (past probe.deadline): the case the prober's
	// skipped_slow rule is for.
	StuckProbePods  int
	StuckProbeDelay time.Duration
	// SpeedJitter and SpeedJitterP: a share SpeedJitterP of first bytes
	// reach the replica's token-work accounting (its speed sample) an
	// exponential delay of mean SpeedJitter late; the client's TTFT is not
	// delayed. 0: none (and no random draw).
	SpeedJitter  time.Duration
	SpeedJitterP float64
}

// DefaultParams returns the documented defaults of Params (an in-cluster
// network; see LoopbackParams for the live bench's).
func DefaultParams() Params {
	return Params{
		RTT:           200 * time.Microsecond,
		ProbeService:  300 * time.Microsecond,
		ProbeSigma:    0.6,
		ProbeTailP:    0.01,
		ProbeTail:     8 * time.Millisecond,
		ScrapeRender:  3 * time.Millisecond,
		ScrapeBytes:   30000,
		ProbeBytes:    30000,
		ORCABytes:     120,
		StreamShare:   1,
		ProxyOverhead: 150 * time.Microsecond,
		Relay:         50 * time.Microsecond,

		StuckProbeDelay: 50 * time.Millisecond,
	}
}

// LoopbackParams models the live bench on one 2-core machine: loopback round
// trips, and a proxy, a simulator and a load generator sharing the cores
// (larger per-request overhead and relay time).
func LoopbackParams() Params {
	p := DefaultParams()
	p.RTT = 60 * time.Microsecond
	p.ProbeService = 250 * time.Microsecond
	p.ScrapeRender = 1 * time.Millisecond
	p.ProxyOverhead = 400 * time.Microsecond
	p.Relay = 150 * time.Microsecond
	return p
}

// probeLatency draws the round trip of one probe: RTT plus a lognormal
// service time with median ProbeService, plus ProbeTail with probability
// ProbeTailP.
func (p *Params) probeLatency(rng *rand.Rand) time.Duration {
	svc := float64(p.ProbeService) * math.Exp(p.ProbeSigma*rng.NormFloat64())
	d := p.RTT + time.Duration(svc)
	if p.ProbeTailP > 0 && rng.Float64() < p.ProbeTailP {
		d += p.ProbeTail
	}
	return d
}
