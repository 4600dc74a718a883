package bench

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/internal/vllmsim"
	"github.com/probegate/probegate/probe"
	"github.com/probegate/probegate/route"
)

// Strategy names, as DESIGN.md's results.json schema spells them.
const (
	RoundRobin     = "round_robin"
	Random         = "random"
	LeastInflight  = "least_inflight"
	Cached         = "cached"
	CachedAdaptive = "cached_adaptive"
	Probe          = "probe"
	ProbeNoHedge   = "probe_nohedge"
	Oracle         = "oracle"
)

// AllStrategies lists every strategy in report order.
var AllStrategies = []string{RoundRobin, Random, LeastInflight, Cached, CachedAdaptive, Probe, ProbeNoHedge, Oracle}

// ExtraStrategies are diagnostic variants of probe, accepted by
// -strategies but not run by default (names outside DESIGN.md's list):
// probe_d3 (route.d 3), probe_dXqY (route.d X with probe.quorum Y whatever
// the fleet's size: probe_d2q2, the default below 32 pods, probe_d3q3,
// probe_d4q2, probe_d4q4, the default from 32 pods, probe_d8q8), probe_q2
// (route.d 2, probe.quorum 2: the same as probe_d2q2), probe_load
// (probe.endpoint load: the cheap /load endpoint), probe_jsq (probe scoring
// on queue alone: weights kv 0), oracle_jsq (the oracle scoring on queue
// alone: join-the-shortest-queue on true state).
// probe_requests (probe with route.load.mode requests, the default until
// issue 13 session 5), probe_tokens (probe with route.load.mode tokens, the
// default since: the same as probe), cached_tokens (cached
// with tokens mode), probe_dw0 and probe_dw4 (tokens mode with
// route.load.decode_weight 0 and 4), probe_nospeed, cached_tokens_nospeed,
// oracle_nospeed (tokens mode with route.load.learn_speed false),
// probe_speed, cached_speed, oracle_speed (requests mode with
// route.load.speed_band 1.25), probe_speed1 (speed_band 1: no band),
// probe_tokens_w1, cached_tokens_w1 (tokens mode with
// route.load.waiting_weight 1, its default since session 4 of issue 13:
// the same as probe_tokens and cached_tokens now), probe_tokens_w1_nospeed
// (and learn_speed false), probe_tokens_w0 (waiting_weight 0, the
// behaviour of probe_tokens before), probe_learned (route.load.pod_speed
// 0: the learned speed alone; the default, so the same as probe),
// probe_podhalf (pod_speed 0.5), probe_pod (pod_speed 1: the pod-reported
// speed wherever known), probe_podseed1, _podseed4, _podseed8,
// _podseed16, _podseed32 (route.load.pod_speed_samples 1, 4, 8, 16, 32:
// the pod-reported speed, a long-lived pod's from its first scrape, weighs
// at least K / (K + n) after n own samples, whatever the pod's other
// clients: route.load.pod_speed_foreign 0), probe_podgate8, _podgate16
// (pod_speed_samples 8, 16 with pod_speed_foreign at its default: the seed
// only while the pod's reports show other clients' requests),
// probe_podseed0 (pod_speed_samples 0: no seed, the default until issue
// 13 session 10; probe is now probe_podgate8), probe_scrape100 (scrape.interval and
// scrape.max_interval 100 ms instead of 1 s: fresher cached views of the
// backends this proxy does not probe, at 10x the scrapes of an idle
// backend), probe_ownpace (scrape.foreign_change 0: the adaptive interval
// follows this proxy's own request rate alone, the default until issue 13
// session 8), probe_fresh and probe_nofresh (route.load.pod_speed_fresh
// true and false whatever its default: the two arms of one same-requests
// A/B), probe_budget and probe_nobudget (scrape.foreign_budget
// config.DefaultForeignBudget and 0, whatever the default: the two arms
// of one same-requests A/B of the foreign pace's per-request budget).
var ExtraStrategies = []string{"probe_fresh", "probe_nofresh", "probe_budget", "probe_nobudget", "probe_learned", "probe_podhalf", "probe_pod", "probe_podseed1", "probe_podseed4", "probe_podseed8", "probe_podseed16", "probe_podseed32", "probe_podgate8", "probe_podgate16", "probe_podseed0", "probe_scrape100", "probe_ownpace", "probe_d3", "probe_d2q2", "probe_d3q3", "probe_d4q2", "probe_d4q4", "probe_d8q8", "probe_q2", "probe_load", "probe_jsq", "oracle_jsq", "probe_requests", "cached_tokens", "probe_tokens", "probe_dw0", "probe_dw4", "probe_nospeed", "cached_tokens_nospeed", "oracle_nospeed", "probe_speed", "probe_speed1", "cached_speed", "oracle_speed", "probe_tokens_w1", "cached_tokens_w1", "probe_tokens_w1_nospeed", "probe_tokens_w0"}

// isProbe reports whether s decides on synchronous probes.
func isProbe(s string) bool { return strings.HasPrefix(s, Probe) }

// StrategyConfig returns the proxy configuration of strategy s in front of
// urls. Every strategy runs the same route.Proxy code; only the policy and
// its knobs differ:
//   - round_robin, random, least_inflight: the policy of that name (d=2 for
//     least_inflight: power of two choices on this proxy's in-flight counts);
//   - cached: EPP's defaults: scrape every 50 ms, fixed interval, weights
//     queue 2, kv 2, prefix 3 (lora 1), max-score pick over all servers,
//     load as request counts (route.load.mode requests, as EPP);
//   - cached_adaptive: cached with scrape.adaptive (interval follows the
//     QPS this proxy sends each backend and, since issue 13 session 8,
//     the other clients' pace of change, scrape.foreign_change, between
//     scrape.min_interval, 50 ms, and scrape.max_interval, config.Default's
//     1 s);
//   - probe: the default configuration (route.d and probe.quorum auto: 2 of
//     2 below 32 pods, 4 of 4 from 32 up; 5 ms deadline, 1 hedge);
//   - probe_nohedge: probe with probe.hedges 0;
//   - oracle, oracle_jsq: cached (or cached on queue alone) over views of
//     the simulator's true state at decision time (see UsesOracle), all
//     servers, with the default route.load.mode (tokens), as probe.
func StrategyConfig(s string, urls []string) (*config.Config, error) {
	cfg := config.Default()
	cfg.Backends.Static = append([]string(nil), urls...)
	cfg.Server.Listen = "127.0.0.1:0"
	cfg.Log.Access = false
	cfg.Log.Level = "error"
	switch s {
	case RoundRobin, Random, LeastInflight:
		cfg.Route.Policy = s
	case Cached, CachedAdaptive, Oracle, "oracle_jsq", "cached_tokens", "cached_tokens_nospeed", "oracle_nospeed", "cached_speed", "oracle_speed", "cached_tokens_w1":
		cfg.Route.Policy = "cached"
		cfg.Route.Weights.Queue, cfg.Route.Weights.KVCache, cfg.Route.Weights.Prefix = 2, 2, 3
		if s == "cached_tokens" || s == "cached_tokens_nospeed" || s == "oracle_nospeed" || s == "cached_tokens_w1" {
			cfg.Route.Load.Mode = config.LoadTokens
		}
		if s == "cached_tokens_w1" {
			cfg.Route.Load.WaitingWeight = 1
		}
		if s == "cached_tokens_nospeed" || s == "oracle_nospeed" {
			cfg.Route.Load.LearnSpeed = false
		}
		if s == Cached || s == CachedAdaptive {
			// EPP scores request counts and KV use, not token work.
			cfg.Route.Load.Mode = config.LoadRequests
		}
		if s == "cached_speed" || s == "oracle_speed" {
			cfg.Route.Load.Mode, cfg.Route.Load.SpeedBand = config.LoadRequests, 1.25
		}
		if s == "oracle_jsq" {
			cfg.Route.Weights = config.Weights{Queue: 1}
		}
		cfg.Scrape.Interval = config.Duration(50 * time.Millisecond)
		cfg.Scrape.Adaptive = s == CachedAdaptive
		if s == CachedAdaptive {
			cfg.Scrape.Interval = config.Duration(time.Second)
			cfg.Scrape.MinInterval = config.Duration(50 * time.Millisecond)
		}
	case Probe:
	case ProbeNoHedge:
		cfg.Probe.Hedges = 0
	case "probe_d3":
		cfg.Route.D = 3
	case "probe_d2q2", "probe_d3q3", "probe_d4q2", "probe_d4q4", "probe_d8q8":
		cfg.Route.D = int(s[len("probe_d")] - '0')
		cfg.Probe.Quorum = int(s[len("probe_dXq")] - '0')
	case "probe_q2":
		cfg.Route.D, cfg.Probe.Quorum = 2, 2
	case "probe_load":
		cfg.Probe.Endpoint = config.EndpointLoad
	case "probe_dw0":
		cfg.Route.Load.Mode, cfg.Route.Load.DecodeWeight = config.LoadTokens, 0
	case "probe_dw4":
		cfg.Route.Load.Mode, cfg.Route.Load.DecodeWeight = config.LoadTokens, 4
	case "probe_tokens":
		cfg.Route.Load.Mode = config.LoadTokens
	case "probe_nospeed":
		cfg.Route.Load.Mode = config.LoadTokens
		cfg.Route.Load.LearnSpeed = false
	case "probe_tokens_w1":
		cfg.Route.Load.Mode, cfg.Route.Load.WaitingWeight = config.LoadTokens, 1
	case "probe_tokens_w0":
		cfg.Route.Load.Mode, cfg.Route.Load.WaitingWeight = config.LoadTokens, 0
	case "probe_tokens_w1_nospeed":
		cfg.Route.Load.Mode, cfg.Route.Load.WaitingWeight, cfg.Route.Load.LearnSpeed = config.LoadTokens, 1, false
	case "probe_speed":
		cfg.Route.Load.Mode, cfg.Route.Load.SpeedBand = config.LoadRequests, 1.25
	case "probe_speed1":
		cfg.Route.Load.Mode, cfg.Route.Load.SpeedBand = config.LoadRequests, 1
	case "probe_requests":
		cfg.Route.Load.Mode = config.LoadRequests
	case "probe_learned":
		cfg.Route.Load.PodSpeed = 0
	case "probe_podhalf":
		cfg.Route.Load.PodSpeed = 0.5
	case "probe_pod":
		cfg.Route.Load.PodSpeed = 1
	case "probe_podseed1":
		cfg.Route.Load.PodSpeedSamples, cfg.Route.Load.PodSpeedForeign = 1, 0
	case "probe_podseed4":
		cfg.Route.Load.PodSpeedSamples, cfg.Route.Load.PodSpeedForeign = 4, 0
	case "probe_podseed8":
		cfg.Route.Load.PodSpeedSamples, cfg.Route.Load.PodSpeedForeign = 8, 0
	case "probe_podseed16":
		cfg.Route.Load.PodSpeedSamples, cfg.Route.Load.PodSpeedForeign = 16, 0
	case "probe_podseed32":
		cfg.Route.Load.PodSpeedSamples, cfg.Route.Load.PodSpeedForeign = 32, 0
	case "probe_podgate8":
		cfg.Route.Load.PodSpeedSamples, cfg.Route.Load.PodSpeedForeign = 8, config.DefaultPodSpeedForeign
	case "probe_podgate16":
		cfg.Route.Load.PodSpeedSamples, cfg.Route.Load.PodSpeedForeign = 16, config.DefaultPodSpeedForeign
	case "probe_podseed0":
		cfg.Route.Load.PodSpeedSamples = 0
	case "probe_jsq":
		cfg.Route.Weights = config.Weights{Queue: 1}
	case "probe_scrape100":
		cfg.Scrape.Interval = config.Duration(100 * time.Millisecond)
		cfg.Scrape.MaxInterval = config.Duration(100 * time.Millisecond)
		cfg.Scrape.ForeignChange = 0 // every 100 ms, as in session 7
	case "probe_ownpace":
		cfg.Scrape.ForeignChange = 0
	case "probe_fresh":
		cfg.Route.Load.PodSpeedFresh = true
	case "probe_nofresh":
		cfg.Route.Load.PodSpeedFresh = false
	case "probe_budget":
		cfg.Scrape.ForeignBudget = config.DefaultForeignBudget
	case "probe_nobudget":
		cfg.Scrape.ForeignBudget = 0
	default:
		return nil, fmt.Errorf("unknown strategy %q", s)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("strategy %s: %w", s, err)
	}
	return cfg, nil
}

// UsesOracle reports whether strategy s decides on the simulator's true
// state (OracleViews) rather than on reports.
func UsesOracle(s string) bool {
	return s == Oracle || s == "oracle_jsq" || s == "oracle_nospeed" || s == "oracle_speed"
}

// ProxyInstance is one running probegate in front of a fleet.
type ProxyInstance struct {
	P    *route.Proxy
	URL  string
	ln   net.Listener
	errc chan error
}

// StartProxy starts a probegate with strategy s on a loopback socket in
// front of fleet; connect, when set, is its upstream.connect_timeout
// (Setup.DialTimeout).
func StartProxy(s string, fleet *vllmsim.Fleet, connect time.Duration) (*ProxyInstance, error) {
	cfg, err := StrategyConfig(s, fleet.URLs())
	if err != nil {
		return nil, err
	}
	if connect > 0 {
		cfg.Upstream.ConnectTimeout = config.Duration(connect)
	}
	opts := route.Options{Config: cfg, Registerer: prometheus.NewRegistry()}
	if UsesOracle(s) {
		opts.Views = OracleViews(fleet)
	}
	p, err := route.New(opts)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		p.Close()
		return nil, err
	}
	pi := &ProxyInstance{P: p, URL: "http://" + ln.Addr().String(), ln: ln, errc: make(chan error, 1)}
	go func() { pi.errc <- p.Serve(ln) }()
	return pi, nil
}

// Stop shuts the proxy down, waiting up to 5 s for streams.
func (pi *ProxyInstance) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = pi.P.Shutdown(ctx)
	select {
	case <-pi.errc:
	case <-time.After(time.Second):
	}
}

// OracleViews returns the oracle for fleet: a route.ViewSource giving each
// server's true state, read from the simulator at the instant of the
// decision. A backend that is not in fleet gets the proxy's local in-flight
// count alone.
func OracleViews(fleet *vllmsim.Fleet) route.ViewSource {
	o := oracleViews{byAddr: map[string]*vllmsim.Server{}}
	for _, s := range fleet.Servers() {
		o.byAddr[s.Addr()] = s
	}
	return o
}

type oracleViews struct{ byAddr map[string]*vllmsim.Server }

// View implements route.ViewSource.
func (o oracleViews) View(b *route.Backend, now time.Time, _ time.Duration) probe.View {
	s, ok := o.byAddr[b.Addr()]
	if !ok {
		return b.State().View(now, 0)
	}
	st := s.State()
	// The server's counts and KV use are the truth; the token work in
	// flight is the proxy's own prediction, as for every strategy
	// (route.load: the simulator does not expose its token queue).
	pre, dec, ns := b.State().Work()
	return probe.View{
		Queue: float64(st.Running + st.Waiting), Waiting: st.Waiting, KVUse: st.KVUse,
		MaxLoRA: s.Config().MaxLoRAs, RunningLoRAs: st.RunningLoRAs, WaitingLoRAs: st.WaitingLoRAs,
		Source: probe.SourceOracle, Inflight: b.State().Inflight(),
		PrefillTokens: pre, DecodeTokens: dec, NsPerToken: ns, PrefillRequests: b.State().View(now, 0).PrefillRequests,
	}
}

// ProxyStats are the counters read from a proxy's registry after a run.
type ProxyStats struct {
	Probes    map[string]float64 // probegate_probes_total by outcome
	Decisions map[string]float64 // probegate_decisions_total by source
	Requests  float64            // probegate_requests_total, all labels
	Errors    float64            // probegate_requests_total with code >= 400 or 499
	Retries   float64
	Scrapes   float64 // probegate_scrapes_total, every backend and outcome
}

// Add accumulates o into s (replicas are summed).
func (s *ProxyStats) Add(o ProxyStats) {
	if s.Probes == nil {
		s.Probes, s.Decisions = map[string]float64{}, map[string]float64{}
	}
	for k, v := range o.Probes {
		s.Probes[k] += v
	}
	for k, v := range o.Decisions {
		s.Decisions[k] += v
	}
	s.Requests += o.Requests
	s.Errors += o.Errors
	s.Retries += o.Retries
	s.Scrapes += o.Scrapes
}

// ProbesSent is the number of probes sent (each completes once: ok, timeout,
// error or cancelled; hedges included; coalesced waits are not probes).
func (s *ProxyStats) ProbesSent() float64 {
	return s.Probes["ok"] + s.Probes["timeout"] + s.Probes["error"] + s.Probes["cancelled"]
}

// DecisionTotal is the number of routing decisions.
func (s *ProxyStats) DecisionTotal() float64 {
	t := 0.0
	for _, v := range s.Decisions {
		t += v
	}
	return t
}

// ReadProxyStats gathers the proxy's counters.
func ReadProxyStats(g prometheus.Gatherer) (ProxyStats, error) {
	st := ProxyStats{Probes: map[string]float64{}, Decisions: map[string]float64{}}
	mfs, err := g.Gather()
	if err != nil {
		return st, err
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "probegate_probes_total":
			for _, m := range mf.GetMetric() {
				st.Probes[label(m, "outcome")] += m.GetCounter().GetValue()
			}
		case "probegate_decisions_total":
			for _, m := range mf.GetMetric() {
				st.Decisions[label(m, "source")] += m.GetCounter().GetValue()
			}
		case "probegate_requests_total":
			for _, m := range mf.GetMetric() {
				v := m.GetCounter().GetValue()
				st.Requests += v
				code := label(m, "code")
				if !strings.HasPrefix(code, "2") {
					st.Errors += v
				}
			}
		case "probegate_retries_total":
			for _, m := range mf.GetMetric() {
				st.Retries += m.GetCounter().GetValue()
			}
		case "probegate_scrapes_total":
			for _, m := range mf.GetMetric() {
				st.Scrapes += m.GetCounter().GetValue()
			}
		}
	}
	return st, nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
