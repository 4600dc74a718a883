package probe

import (
	"sync/atomic"
	"time"
)

// State is everything this proxy knows about one backend's load: the latest
// report (from a probe, an ORCA header or a scrape) and its own dispatch
// counters. A State is long-lived: the pool that lists backends is rebuilt
// on every membership change, but the State of an address that stays in the
// pool is carried over, so its counters and reports survive.
//
// All methods are safe for concurrent use. The read path (Latest, View,
// Inflight, Dispatched) takes no lock: it loads atomics and one
// atomic.Pointer to an immutable report.
type State struct {
	addr  string // "host:port", immutable
	https bool   // spoken to over TLS, immutable

	// Updated with atomic adds on every request this proxy sends.
	dispatched atomic.Uint64
	finished   atomic.Uint64

	// Token work this proxy dispatched and has not seen done (work.go):
	// prompt tokens of requests whose first response byte has not arrived,
	// expected output tokens of requests not finished, and the learned
	// prefill speed (float64 bits of the median of the speed samples in
	// speed, nanoseconds per token; 0 until the first sample). Updated
	// with atomic adds and stores.
	prefillPending atomic.Int64
	prefillWaiting atomic.Int64 // requests counted in prefillPending
	decodePending  atomic.Int64
	nsPerToken     atomic.Uint64
	// Batch seat time this proxy's requests hold (seat.go: one word, its
	// layout there) and the learned decode speed (float64 bits, ns per
	// output token; 0: none yet). Beside the token work: a pick reads both.
	seat     atomic.Uint64
	decodeNs atomic.Uint64
	speed    speedSamples

	// Published with compare-and-swap by Report; never modified after.
	latest atomic.Pointer[report]

	// The synchronous probe in flight to this backend, shared by the Runs
	// that need its answer (nil when none; see flight). Set and cleared by
	// compare-and-swap.
	flight atomic.Pointer[flight]
	// Until when (wall clock, Unix ns; 0: not) Runs do not wait for a
	// probe of this backend: its last probe did not answer within
	// probe.deadline. Set by that probe, cleared by the next one that
	// answers in time (see Prober.Run).
	probeSlowUntil atomic.Int64
	// How many probe answers in a row reported exactly what the report
	// before each said (an idle pod: see Prober.freshFor); 0 after one
	// that differed.
	quiet atomic.Int32

	// The scrape loop's current interval in nanoseconds (0: not scraped).
	scrapeInterval atomic.Int64
	// Set while the scrape loop's scrapes fail (from the first failure to
	// the next success).
	scrapeFailing atomic.Bool
}

// ScrapeFailing reports whether the backend's scrapes are failing now. It
// is false when the backend is not scraped.
func (s *State) ScrapeFailing() bool { return s.scrapeFailing.Load() }

// ScrapeInterval returns the current interval of the backend's scrape loop,
// or 0 when it is not scraped.
func (s *State) ScrapeInterval() time.Duration { return time.Duration(s.scrapeInterval.Load()) }

// report is one published Load together with the local counters at the
// moment it was published, which View uses to correct for requests
// dispatched and finished since.
type report struct {
	load       Load
	dispatched uint64
	finished   uint64
	progress   progress
	pod        podSpeed // the pod-reported speed as of this report
	foreign    float64  // the foreign share as of this report (foreign.go)
	seatLimit  int32    // the seat limit as of this report (seatlimit.go)
}

// progress is what the reports so far say of the engine stepping: the
// backend's token counter (Load.Tokens) and its KV-cache use (Load.KVUse)
// as /metrics reported them, when each was measured, and the span over
// which either last moved. Carried from report to report, so that reports
// without them (ORCA, /load) do not erase it.
//
// The KV use is there for long prefills: vLLM counts a prompt's tokens
// only at its first token, and a step that produces no token records no
// iteration stats, so while a long prompt prefills alone in chunks no
// token counter moves; its KV use grows with each chunk's blocks. The
// gauge changes only when the engine takes a step (blocks are allocated
// and freed by the scheduler), so a hung engine's stands still like its
// counters. ORCA's copy of it is not compared: it comes from another
// serializer than /metrics', and a value that differs only in its digits
// is no step.
type progress struct {
	tokens   float64 // the counter in the last report that carried one
	tokensAt int64   // that report's At, Unix ns; 0: none yet
	kv       float64 // the KV use in the last /metrics report that carried one
	kvAt     int64   // that report's At, Unix ns; 0: none yet
	// from is the At (Unix ns) of the report before the last move: the
	// counter grew, or the KV use changed, between from and a later
	// report. 0: never seen.
	from int64
}

// next returns p after a report l.
func (p progress) next(l *Load) progress {
	at := l.At.UnixNano()
	if l.Tokens > 0 {
		if p.tokensAt != 0 && l.Tokens > p.tokens {
			p.from = max(p.from, p.tokensAt)
		}
		p.tokens, p.tokensAt = l.Tokens, at
	}
	if l.KVUse >= 0 && l.Source != SourceORCA {
		if p.kvAt != 0 && l.KVUse != p.kv {
			p.from = max(p.from, p.kvAt)
		}
		p.kv, p.kvAt = l.KVUse, at
	}
	return p
}

// NewState returns the State of the backend at addr ("host:port", spoken to
// over plain HTTP), with no report and zero counters.
func NewState(addr string) *State { return &State{addr: addr} }

// NewHTTPSState is NewState for a backend spoken to over TLS (an https
// URL): HTTPFetcher probes and scrapes it over TLS too.
func NewHTTPSState(addr string) *State { return &State{addr: addr, https: true} }

// Addr returns the backend's "host:port".
func (s *State) Addr() string { return s.addr }

// Dispatch records that this proxy sent a request to the backend. Every
// Dispatch must be followed by exactly one Finish.
func (s *State) Dispatch() { s.dispatched.Add(1) }

// Finish records that a request this proxy sent has ended (success, error or
// client disconnect alike).
func (s *State) Finish() { s.finished.Add(1) }

// Dispatched returns the number of requests ever dispatched to the backend by
// this proxy. It only grows; the scraper derives the request rate from it.
func (s *State) Dispatched() uint64 { return s.dispatched.Load() }

// Inflight returns the number of requests this proxy has dispatched to the
// backend that have not finished yet (never negative).
func (s *State) Inflight() int {
	// Read finished first: dispatched can only have grown since, so the
	// difference is never negative when every Finish follows its Dispatch.
	f := s.finished.Load()
	d := s.dispatched.Load()
	if d < f {
		return 0
	}
	return int(d - f)
}

// Latest returns the newest report, or nil if there has been none. The Load
// must not be modified.
func (s *State) Latest() *Load {
	if r := s.latest.Load(); r != nil {
		return &r.load
	}
	return nil
}

// Report publishes l as the backend's latest report if l.At is after the At
// of the current one, and reports whether it did. A report that is not newer
// than what is known (a slow scrape overtaken by a probe, a late answer) is
// dropped: older knowledge never overwrites newer knowledge, whatever the
// sources.
//
// Report copies *l; the caller may reuse it. A field l leaves unknown is
// carried over from the report it replaces, so that partial reports refine
// rather than erase what is known:
//   - KVUse, and the LoRA fields (MaxLoRA, RunningLoRAs, WaitingLoRAs) when
//     l carries none of them (an ORCA header or a /load answer);
//   - Running, when l knows Waiting but not Running and has no ServerLoad
//     (vLLM's ORCA header reports waiting requests and KV use only);
//   - Running, Waiting and ServerLoad, when l knows none of them (a KV-only
//     ORCA header).
//
// Running and Waiting are never carried into a /load report (ServerLoad
// known), since Queue prefers them over ServerLoad. Carried values are as
// old as the last report that measured them; the scraper refreshes them
// every scrape interval.
//
// Report also snapshots the dispatch counters, so View can add the requests
// dispatched and subtract those finished after the report, and carries the
// pod-reported prefill speed forward, updated from l's prefill counters
// (podspeed.go), and the share of the pod's requests other clients sent,
// updated from l's queue (foreign.go).
func (s *State) Report(l *Load) bool {
	for {
		cur := s.latest.Load()
		if cur != nil && !l.At.After(cur.load.At) {
			return false
		}
		r := &report{load: *l}
		if cur != nil {
			inherit(&r.load, &cur.load)
			r.progress = cur.progress
			r.pod = cur.pod
			r.foreign = cur.foreign
			r.seatLimit = cur.seatLimit
		}
		r.progress = r.progress.next(l)
		r.pod = r.pod.next(&r.load)
		r.finished = s.finished.Load()
		r.dispatched = s.dispatched.Load()
		// l, not r.load: a report without a queue of its own must not
		// count the queue it inherited a second time.
		r.foreign = nextForeign(r.foreign, l, int(r.dispatched-r.finished))
		r.seatLimit = nextSeatLimit(r.seatLimit, l)
		if s.latest.CompareAndSwap(cur, r) {
			return true
		}
	}
}

// ProgressedSince reports whether the backend's reports show it working
// after t: two reports both taken after t, the later with a greater token
// counter (Load.Tokens) than the earlier, or two /metrics reports with a
// different KV-cache use (Load.KVUse; see progress). A hung engine whose
// HTTP server still answers /metrics shows neither; nor does a backend
// whose reports carry neither (probe.endpoint load, ORCA alone) or that is
// not reported on at all: for those it is false.
func (s *State) ProgressedSince(t time.Time) bool {
	r := s.latest.Load()
	return r != nil && r.progress.from != 0 && r.progress.from >= t.UnixNano()
}

// inherit fills the fields n leaves unknown from prev; see State.Report.
func inherit(n, prev *Load) {
	if n.KVUse < 0 {
		n.KVUse = prev.KVUse
	}
	if n.BaseModel == "" {
		n.BaseModel = prev.BaseModel
	}
	if n.MaxLoRA == 0 && n.RunningLoRAs == nil && n.WaitingLoRAs == nil {
		n.MaxLoRA, n.RunningLoRAs, n.WaitingLoRAs = prev.MaxLoRA, prev.RunningLoRAs, prev.WaitingLoRAs
	}
	switch {
	case n.Running < 0 && n.Waiting < 0 && n.ServerLoad < 0: // no queue signal at all
		n.Running, n.Waiting, n.ServerLoad = prev.Running, prev.Waiting, prev.ServerLoad
	case n.Running < 0 && n.Waiting >= 0 && n.ServerLoad < 0: // vLLM's ORCA header
		n.Running = prev.Running
	}
}

// View is one backend's load as the scorers see it at a decision: the
// latest report corrected by this proxy's own traffic since, or the local
// in-flight count alone when there is no fresh report.
type View struct {
	// Queue is the estimated number of requests running or waiting at the
	// backend: the report's Queue() plus Correction, never below 0; or
	// Inflight when Source is SourceLocal.
	Queue float64
	// KVUse is the KV-cache use in [0,1], or -1 if unknown.
	KVUse float64
	// Waiting is the report's waiting count, uncorrected, or -1 if unknown
	// (the saturation filter reads it).
	Waiting int
	// LoRA state of the report (shared with the immutable Load: do not
	// modify). Zero values when unknown or when Source is SourceLocal.
	MaxLoRA                    int
	RunningLoRAs, WaitingLoRAs []string
	// BaseModel is the report's base model name ("" if unknown).
	BaseModel string
	// Source is where the report came from, or SourceLocal.
	Source Source
	// Age is how old the report is at the decision (0 for SourceLocal).
	Age time.Duration
	// Correction is the number of requests this proxy dispatched to the
	// backend since the report minus those that finished since (0 for
	// SourceLocal).
	Correction int
	// Inflight is this proxy's own in-flight count to the backend.
	Inflight int
	// PrefillTokens is the prompt tokens of this proxy's requests to the
	// backend that have not produced their first byte yet (queued or in
	// prefill); DecodeTokens the expected output tokens of its unfinished
	// requests. Local predictions: see State.AddWork.
	PrefillTokens, DecodeTokens float64
	// PrefillRequests is how many requests PrefillTokens counts.
	PrefillRequests int
	// NsPerToken is the learned time to first byte per prefill token at
	// this backend (see State.PrefillDone), 0 when not learned yet.
	NsPerToken float64
	// SpeedSamples is how many of this proxy's own samples NsPerToken is
	// the median of (State.SpeedSamples).
	SpeedSamples int
	// PodNsPerToken is the time per prefill token the backend's own
	// counters show (see podSpeed), 0 when its reports have not yielded
	// one. It is kept when the report goes stale: a speed changes slowly.
	PodNsPerToken float64
	// PodSeeded tells that PodNsPerToken started from the pod's lifetime
	// counters in the first report this proxy read of it (a long-lived
	// pod, see podSpeed) rather than from a window of this proxy's reports.
	PodSeeded bool
	// ForeignShare is the mean share of the backend's reported requests
	// that other clients sent (State.ForeignShare), kept when the report
	// goes stale; 0 before any report with a queue.
	ForeignShare float64
	// Seats is the backend's batch seat account (see Seats) as of the
	// read, kept when the report goes stale: Seats.LeftNs gives the seat
	// time this proxy's requests hold there.
	Seats Seats
	// SeatLimit is the backend's batch seats as its reports have shown
	// them (State.SeatLimit), kept when the report goes stale; 0 before
	// a report showed a request running.
	SeatLimit int
}

// View returns the backend's load as of now. If the latest report is younger
// than staleAfter, the view is that report corrected by the local counters:
// Queue = report.Queue() + dispatched since - finished since, but never
// less than this proxy's own in-flight count to the backend (a lower bound
// on what the backend holds), and Source is the report's source. If the report does not know its queue
// (a KV-only ORCA header with no earlier report), Queue falls back to
// Inflight while KVUse still comes from the report. With no report younger
// than staleAfter, Source is SourceLocal, Queue is Inflight and KVUse is -1.
//
// View does not allocate and takes no lock.
func (s *State) View(now time.Time, staleAfter time.Duration) View {
	var v View
	s.ViewInto(&v, now, staleAfter)
	return v
}

// ViewInto sets *v to View(now, staleAfter), writing the fields in place:
// a caller filling a slice of views saves a copy of the struct per view.
func (s *State) ViewInto(v *View, now time.Time, staleAfter time.Duration) {
	r := s.latest.Load() // before the counters: see counts
	inflight, corr := s.counts(r)
	v.Queue, v.KVUse, v.Waiting, v.Source, v.Inflight = float64(inflight), -1, -1, SourceLocal, inflight
	v.MaxLoRA, v.RunningLoRAs, v.WaitingLoRAs, v.BaseModel = 0, nil, nil, ""
	v.Age, v.Correction = 0, 0
	v.PrefillTokens, v.DecodeTokens, v.NsPerToken = s.Work()
	v.SpeedSamples = s.SpeedSamples()
	v.PrefillRequests = int(max(s.prefillWaiting.Load(), 0))
	v.PodNsPerToken, v.PodSeeded, v.ForeignShare, v.SeatLimit = 0, false, 0, 0
	v.Seats = Seats(s.seat.Load())
	if r == nil {
		return
	}
	v.PodNsPerToken, v.PodSeeded, v.ForeignShare, v.SeatLimit = r.pod.ns, r.pod.seeded, r.foreign, int(r.seatLimit)
	age := max(now.Sub(r.load.At), 0)
	if age >= staleAfter {
		return
	}
	v.Source = r.load.Source
	v.Age = age
	v.KVUse = r.load.KVUse
	v.Waiting = r.load.Waiting
	v.MaxLoRA = r.load.MaxLoRA
	v.RunningLoRAs = r.load.RunningLoRAs
	v.WaitingLoRAs = r.load.WaitingLoRAs
	v.BaseModel = r.load.BaseModel
	if q := r.load.Queue(); q >= 0 {
		v.Correction = corr
		v.Queue = correctedQueue(q, corr, inflight)
	}
}

// counts returns this proxy's in-flight count to the backend and, when r
// is not nil, the requests dispatched since r minus those finished since.
// r must have been loaded before the call.
func (s *State) counts(r *report) (inflight, corr int) {
	f := s.finished.Load()
	d := s.dispatched.Load()
	if d > f {
		inflight = int(d - f)
	}
	if r != nil {
		// Counters only grow and d, f were read after r was published,
		// so the differences are the counts since the report (two's
		// complement keeps them exact even if a concurrent Report raced
		// the reads).
		corr = int(d-r.dispatched) - int(f-r.finished)
	}
	return inflight, corr
}

// correctedQueue is a fresh report's queue q corrected by corr, floored at
// this proxy's own in-flight count: requests sent before the report was
// taken may not have reached the server's gauges yet (they sit in its HTTP
// layer or on the wire), and the correction only counts what was sent
// after the report was published. Without the floor, a burst of
// simultaneous decisions all read the same report and herd onto the
// server it showed idle.
func correctedQueue(q, corr, inflight int) float64 {
	return float64(max(q+corr, inflight, 0))
}

// Brief is the part of a View that ranks backends against each other by
// load: the fields the router's load model and the queue and KV scorers
// read, each equal to the View's field of the same name at the same
// instant. It holds no pointer, so reading many of them is cheap.
type Brief struct {
	Queue, KVUse                float64
	Waiting                     int
	Source                      Source
	PrefillTokens, DecodeTokens float64
	PrefillRequests             int
	NsPerToken, PodNsPerToken   float64
	SpeedSamples                int
	PodSeeded                   bool
	ForeignShare                float64
	Seats                       Seats
	SeatLimit                   int
}

// BriefInto sets *b to the Brief of the View at now with staleAfter, given
// cutoff = now.Add(-staleAfter): a report is fresh when its At is after
// cutoff, which is exactly View's "younger than staleAfter" (one time
// comparison per backend instead of a subtraction, for a caller reading
// many backends at one instant). It writes the fields in place rather
// than returning a struct, which a caller reading many backends would
// copy. It does not allocate and takes no lock.
func (s *State) BriefInto(b *Brief, cutoff time.Time) {
	r := s.latest.Load() // before the counters: see counts
	inflight, corr := s.counts(r)
	b.PrefillTokens, b.DecodeTokens, b.NsPerToken = s.Work()
	b.SpeedSamples = s.SpeedSamples()
	b.PrefillRequests = int(max(s.prefillWaiting.Load(), 0))
	b.PodNsPerToken, b.PodSeeded, b.ForeignShare, b.SeatLimit = 0, false, 0, 0
	b.Seats = Seats(s.seat.Load())
	if r != nil {
		b.PodNsPerToken, b.PodSeeded, b.ForeignShare, b.SeatLimit = r.pod.ns, r.pod.seeded, r.foreign, int(r.seatLimit)
	}
	if r == nil || !r.load.At.After(cutoff) {
		b.Queue, b.KVUse, b.Waiting, b.Source = float64(inflight), -1, -1, SourceLocal
		return
	}
	b.Source = r.load.Source
	b.KVUse = r.load.KVUse
	b.Waiting = r.load.Waiting
	b.Queue = float64(inflight)
	if q := r.load.Queue(); q >= 0 {
		b.Queue = correctedQueue(q, corr, inflight)
	}
}

// Brief returns v's Brief.
func (v *View) Brief() Brief {
	return Brief{Queue: v.Queue, KVUse: v.KVUse, Waiting: v.Waiting, Source: v.Source,
		PrefillTokens: v.PrefillTokens, DecodeTokens: v.DecodeTokens,
		PrefillRequests: v.PrefillRequests, NsPerToken: v.NsPerToken, PodNsPerToken: v.PodNsPerToken,
		SpeedSamples: v.SpeedSamples, PodSeeded: v.PodSeeded, ForeignShare: v.ForeignShare, Seats: v.Seats, SeatLimit: v.SeatLimit}
}
