package config

// Load modes (route.load.mode).
const (
	// LoadTokens scores candidates by expected time to first token from
	// token work: prompt tokens queued ahead plus the request's own
	// prefill. The default since issue 13 session 5: it won or tied
	// requests mode in every 6-seed live comparison once the token work
	// was counted right (bench/HISTORY.md, "Session 5").
	LoadTokens = "tokens"
	// LoadRequests scores candidates by request counts (running + waiting,
	// corrected by this proxy's dispatches), as EPP does.
	LoadRequests = "requests"
)

// LoadModel configures how a backend's load is estimated for the queue scorer
// (route.load).
type LoadModel struct {
	Mode string `yaml:"mode"` // tokens | requests; default tokens
	// DecodeWeight: prefill-token equivalents of one expected output token
	// in flight at a backend. Default 0.
	DecodeWeight float64 `yaml:"decode_weight"`
	// RunningWeight: what one request past its prefill (decoding, holding
	// a batch seat) counts, in requests of the mean prompt. Default 1.
	RunningWeight float64 `yaml:"running_weight"`
	// WaitingWeight: what one request not yet past its prefill (queued for
	// a batch seat, or prefilling) counts, in requests, on top of its
	// prefill work (tokens mode). Default 1: it needs a batch seat as a
	// running request holds one (bench/HISTORY.md, issue 13 session 4).
	WaitingWeight float64 `yaml:"waiting_weight"`
	// LearnSpeed: scale each backend's expected time to first token by its
	// learned time per prompt token (a slow server looks slow). Default true.
	LearnSpeed bool `yaml:"learn_speed"`
	// PodSpeed: weight, in [0,1], of the backend's own prefill speed (the
	// deltas of vLLM's request_prefill_time_seconds and
	// request_prefill_kv_computed_tokens between reports) against the
	// learned one, where both are known; either alone when the other is
	// not. 0 uses the learned speed only. Read only with learn_speed.
	// Default DefaultPodSpeed.
	PodSpeed float64 `yaml:"pod_speed"`
	// PodSpeedSamples: when > 0, a long-lived pod's pod-reported speed
	// (seeded from the lifetime counters of the first report this proxy
	// read) weighs at least PodSpeedSamples / (PodSpeedSamples + n)
	// against a learned speed timed from n of this proxy's own requests:
	// it decides alone until the proxy has timed the backend, and yields
	// as the proxy's own timings arrive. A pod that was not long-lived
	// when first read is weighed by pod_speed alone. 0: off. Read only
	// with learn_speed. Default DefaultPodSpeedSamples.
	PodSpeedSamples float64 `yaml:"pod_speed_samples"`
	// PodSpeedForeign: with pod_speed_samples, the seed applies to a
	// backend only while its reports show other clients' requests: a
	// mean share (over reports, each weighing 1/5) of the pod's running
	// + waiting beyond this proxy's own in flight there of at least
	// PodSpeedForeign. A lone proxy (no other clients) thus scores with
	// its own timings alone. 0: the seed applies always. In [0,1].
	// Default DefaultPodSpeedForeign.
	PodSpeedForeign float64 `yaml:"pod_speed_foreign"`
	// PodSpeedFresh: pod_speed_samples weighs, besides a long-lived pod's
	// seeded speed, the speed a pod that was fresh when this proxy first
	// read it reports over this proxy's windows of its counters (once the
	// first window is long enough), gated by pod_speed_foreign alike.
	// false: only seeded speeds. Read only with learn_speed. Default
	// DefaultPodSpeedFresh.
	PodSpeedFresh bool `yaml:"pod_speed_fresh"`
	// DefaultOutputTokens: expected output of a request that does not fix
	// it (no ignore_eos) before the per-model estimate has samples; capped
	// by the request's max_tokens. Default 128.
	DefaultOutputTokens int `yaml:"default_output_tokens"`
	// SpeedBand: in requests mode, a backend whose learned time per prompt
	// token is more than SpeedBand times the candidates' mean (or less
	// than its inverse) has its queue scaled by that ratio: (queue + 1) x
	// ratio - 1, the expected time to first token in requests of a
	// mean-speed backend. 0 turns it off (and learn_speed false too).
	SpeedBand float64 `yaml:"speed_band"`
	// SeatWeight: weight of the batch seat time this proxy's decodes still
	// hold at a backend (tokens mode): their expected output tokens not yet
	// produced times the backend's learned decode time per token, added to
	// the expected time to first token. 0 turns it off. Default
	// DefaultSeatWeight.
	SeatWeight float64 `yaml:"seat_weight"`
	// SeatFreeShare: the share of the seat time (seat_weight) counted at
	// a backend with a batch seat free: fewer requests running and waiting
	// than the most its reports have shown running, and none waiting. 1
	// counts it whole everywhere. In [0,1]. Default DefaultSeatFreeShare.
	SeatFreeShare float64 `yaml:"seat_free_share"`
}

// DefaultPodSpeed is route.load.pod_speed's default: off. In the live
// bench's trace replay on the hetero fleet at R=8, probe with pod_speed 0.5
// had 1.19x the p99 TTFT of the learned speed alone per seed (6 seeds; one
// hold of 3 seeds 1.47x, every seed worse, the other 0.87x), a tie at R=1,
// while fleetsim showed +-1% (bench/HISTORY.md, issue 13 session 6).
const DefaultPodSpeed = 0.0

// DefaultPodSpeedSamples is route.load.pod_speed_samples's default: 8,
// with the seed gated on other clients (DefaultPodSpeedForeign). On the
// code trace replayed on the hetero fleet with long-lived pods at 8
// replicas it made p99 TTFT 0.87x probe's without it in fleetsim (30
// windows, 24 lower) and 0.91x per seed live (20 seeds, 13 lower); behind
// a lone proxy the gate stayed closed (fleetsim identical; live, a foreign
// share of 0 at every decision), where the ungated seed had cost 1.07x
// (fleetsim) and 1.10x per seed (live, session 9). Fresh pods are never
// seeded. Cost: fleetsim's homogeneous workloads with long-lived pods at 8
// replicas, 1.01-1.05x per window; live replicas_r8 0.93x per seed (6
// seeds) (bench/HISTORY.md, issue 13 session 10).
const DefaultPodSpeedSamples = 8.0

// DefaultPodSpeedForeign is route.load.pod_speed_foreign's default: a
// quarter of the pod's requests from other clients. With R replicas
// sharing a fleet evenly a replica sees a share of about (R-1)/R (7/8 at
// R=8, 1/2 at R=2); a lone proxy sees none.
const DefaultPodSpeedForeign = 0.25

// DefaultPodSpeedFresh is route.load.pod_speed_fresh's default: on. On
// the code trace replayed on the hetero fleet with fresh pods (the live
// bench's goal cells), fleetsim 90 windows of 20 s: p99 TTFT 0.970x pooled
// and 0.971x per window at 8 replicas (36 lower, 28 higher), 0.977x /
// 0.996x at 2; a lone proxy unchanged (the pod_speed_foreign gate stays
// shut). fleetsim's generalization sweeps with fresh pods at 8 replicas:
// p99 geomean 0.967 (sweep A, 64 cells), 0.957 (lognormal and trace sizes,
// 64), 0.982 (bimodal on-off, 48); losses to a blind policy 1 -> 0, none
// new; long-lived pods and a lone proxy unchanged. Live, both settings on
// the same requests (the bench's probe_fresh and probe_nofresh in one
// invocation per seed, trace_hetero_r8, -trace-rows 116, 40 seeds, the arm
// run first alternating): p99 TTFT per seed 0.937x (25 of 40 lower, sign
// test p 0.15, bootstrap 95% 0.87-1.01), p50 1.04x (1.00-1.08), mean 1.00x:
// fleetsim's tail gain, not significant alone, at a small median cost
// (bench/results/2026-12-02-s15/trace). Session 14's 1.05x per seed
// compared builds that replayed different requests.
const DefaultPodSpeedFresh = true

// DefaultSeatWeight is route.load.seat_weight's default.
const DefaultSeatWeight = 0.03

// DefaultSeatFreeShare is route.load.seat_free_share's default: 1, the
// seat time counted whole everywhere (as before the key). 0.5 fixed most
// of fleetsim's decode-heavy losses to cached and a blind policy but lost
// to round_robin on fixed-size requests (bench/results/2026-12-02-s16/
// general): not a default until a sweep shows no new loss.
const DefaultSeatFreeShare = 1.0

func defaultLoad() LoadModel {
	return LoadModel{Mode: LoadTokens, DecodeWeight: 0, RunningWeight: 1, WaitingWeight: 1, LearnSpeed: true, PodSpeed: DefaultPodSpeed, PodSpeedSamples: DefaultPodSpeedSamples, PodSpeedForeign: DefaultPodSpeedForeign, PodSpeedFresh: DefaultPodSpeedFresh, DefaultOutputTokens: 128, SeatWeight: DefaultSeatWeight, SeatFreeShare: DefaultSeatFreeShare}
}

func (v *checker) load(l LoadModel) {
	v.oneOf("route.load.mode", l.Mode, LoadTokens, LoadRequests)
	v.weight("route.load.decode_weight", l.DecodeWeight)
	v.weight("route.load.running_weight", l.RunningWeight)
	v.weight("route.load.waiting_weight", l.WaitingWeight)
	v.weight("route.load.seat_weight", l.SeatWeight)
	v.atLeast("route.load.default_output_tokens", int64(l.DefaultOutputTokens), 1)
	if !(l.PodSpeed >= 0 && l.PodSpeed <= 1) {
		v.add("route.load.pod_speed", "must be between 0 and 1, got %v", l.PodSpeed)
	}
	if !(l.PodSpeedSamples >= 0 && l.PodSpeedSamples <= 1e6) {
		v.add("route.load.pod_speed_samples", "must be between 0 (off) and 1e6, got %v", l.PodSpeedSamples)
	}
	if !(l.PodSpeedForeign >= 0 && l.PodSpeedForeign <= 1) {
		v.add("route.load.pod_speed_foreign", "must be between 0 (always) and 1, got %v", l.PodSpeedForeign)
	}
	if !(l.SeatFreeShare >= 0 && l.SeatFreeShare <= 1) {
		v.add("route.load.seat_free_share", "must be between 0 and 1, got %v", l.SeatFreeShare)
	}
	if l.SpeedBand != 0 && l.SpeedBand < 1 {
		v.add("route.load.speed_band", "must be 0 (off) or at least 1, got %v", l.SpeedBand)
	}
}
