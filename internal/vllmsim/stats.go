package vllmsim

// bucketSet is a histogram's bucket upper bounds and their rendered `le` values.
type bucketSet struct {
	bounds []float64
	le     []string
}

func newBucketSet(bounds ...float64) *bucketSet {
	s := &bucketSet{bounds: bounds}
	for _, b := range bounds {
		s.le = append(s.le, string(pyFloat(nil, b)))
	}
	return s
}

// Bucket upper bounds, as vLLM's V1 Prometheus logger defines them.
var (
	ttftBuckets = newBucketSet(0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
		0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
	itlBuckets = newBucketSet(0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
		1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
	latencyBuckets = newBucketSet(0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0,
		30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
	tokenBuckets = newBucketSet(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000,
		10000, 20000, 50000, 100000)
)

const maxBuckets = 24

// Histogram is a fixed-bucket histogram value; copying it copies its counts.
type Histogram struct {
	set *bucketSet // shared, read-only
	// Counts[i] counts observations <= bounds[i] and > bounds[i-1] (not cumulative);
	// Counts[len(bounds)] counts those above every bound.
	Counts [maxBuckets + 1]uint64
	Count  uint64
	Sum    float64
}

func newHistogram(set *bucketSet) Histogram { return Histogram{set: set} }

// Bounds returns the bucket upper bounds (shared; do not modify).
func (h *Histogram) Bounds() []float64 { return h.set.bounds }

// observeN records n observations of value v.
func (h *Histogram) observeN(v float64, n uint64) {
	i := 0
	for i < len(h.set.bounds) && v > h.set.bounds[i] {
		i++
	}
	h.Counts[i] += n
	h.Count += n
	h.Sum += v * float64(n)
}

// Mean is Sum/Count, or 0 with no observation.
func (h *Histogram) Mean() float64 {
	if h.Count == 0 {
		return 0
	}
	return h.Sum / float64(h.Count)
}

// Stats are an engine's cumulative counters and latency histograms, in virtual
// seconds. Stats is a value: Engine.Stats returns a copy.
type Stats struct {
	PrefixQueries    int64 // prompt tokens looked up in the prefix cache
	PrefixHits       int64 // of those, tokens found cached
	Preemptions      int64
	AdapterLoads     int64
	FinishedStop     int64
	FinishedLength   int64
	FinishedAbort    int64
	PromptTokens     int64 // prompt tokens of requests past their prefill (counted at the first token, cached tokens included, as vLLM V1)
	GenerationTokens int64 // tokens generated (all requests)
	Steps            int64

	TTFT        Histogram // time to first token
	ITL         Histogram // inter-token latency
	E2E         Histogram // arrival to finish
	QueueTime   Histogram // arrival to first scheduling
	PromptLen   Histogram // prompt tokens per finished request
	GenerateLen Histogram // generated tokens per finished request
	// PrefillTime is vLLM's request_prefill_time_seconds: per finished
	// request that produced a token, the time from its first admission to
	// the running batch to its first token. Requests prefilled in the same
	// steps overlap: the sum over requests exceeds the time spent.
	PrefillTime Histogram
	// PrefillComputed is vLLM's request_prefill_kv_computed_tokens: per
	// finished request that produced a token, the prompt tokens its
	// prefill computed (not found in the prefix cache at admission).
	PrefillComputed Histogram
}

// PrefillTotals returns the sums of the PrefillTime (virtual seconds) and
// PrefillComputed (tokens) histograms: the counters a pod's prefill speed
// is derived from (probe.Load.PrefillSeconds, PrefillTokens).
// It does not copy the Stats.
func (e *Engine) PrefillTotals() (seconds, tokens float64) {
	return e.stats.PrefillTime.Sum, e.stats.PrefillComputed.Sum
}

func newStats() Stats {
	return Stats{
		TTFT:        newHistogram(ttftBuckets),
		ITL:         newHistogram(itlBuckets),
		E2E:         newHistogram(latencyBuckets),
		QueueTime:   newHistogram(latencyBuckets),
		PromptLen:   newHistogram(tokenBuckets),
		GenerateLen: newHistogram(tokenBuckets),
		PrefillTime: newHistogram(latencyBuckets),

		PrefillComputed: newHistogram(tokenBuckets),
	}
}

// Finished is the number of requests that finished for any reason.
func (s *Stats) Finished() int64 { return s.FinishedStop + s.FinishedLength + s.FinishedAbort }
