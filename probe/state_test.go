package probe

import (
	"slices"
	"sync"
	"testing"
	"time"
)

func load(src Source, at time.Duration, running, waiting int, kv float64) *Load {
	l := Unknown(t0.Add(at), src)
	l.Running, l.Waiting, l.KVUse = running, waiting, kv
	return &l
}

func TestStateReportAndView(t *testing.T) {
	const stale = 2 * time.Second
	ms := time.Millisecond
	orcaKV := func(at time.Duration, waiting int, kv float64) *Load { return load(SourceORCA, at, -1, waiting, kv) }
	srvLoad := func(at time.Duration, n int) *Load {
		l := Unknown(t0.Add(at), SourceProbe)
		l.ServerLoad = n
		return &l
	}
	type step struct {
		dispatch, finish int   // applied before the report
		report           *Load // nil: no report in this step
		accepted         bool
	}
	tests := []struct {
		name       string
		steps      []step
		dispatch   int // after the last step
		finish     int
		now        time.Duration
		wantQueue  float64
		wantKV     float64
		wantSource Source
		wantCorr   int
		wantAge    time.Duration
	}{
		{
			name:     "no report: local in-flight",
			dispatch: 3, finish: 1, now: 0,
			wantQueue: 2, wantKV: -1, wantSource: SourceLocal,
		},
		{
			name:      "fresh scrape, no traffic since",
			steps:     []step{{report: load(SourceScrape, 0, 4, 2, 0.5), accepted: true}},
			now:       100 * ms,
			wantQueue: 6, wantKV: 0.5, wantSource: SourceScrape, wantAge: 100 * ms,
		},
		{
			name: "older report ignored",
			steps: []step{
				{report: load(SourceProbe, 10*ms, 1, 0, 0.1), accepted: true},
				{report: load(SourceScrape, 5*ms, 9, 9, 0.9), accepted: false},
				{report: load(SourceScrape, 10*ms, 9, 9, 0.9), accepted: false}, // equal At: not newer
			},
			now:       20 * ms,
			wantQueue: 1, wantKV: 0.1, wantSource: SourceProbe, wantAge: 10 * ms,
		},
		{
			name: "probe newer than scrape wins",
			steps: []step{
				{report: load(SourceScrape, 0, 10, 10, 0.9), accepted: true},
				{report: load(SourceProbe, 3*ms, 2, 0, 0.2), accepted: true},
			},
			now:       4 * ms,
			wantQueue: 2, wantKV: 0.2, wantSource: SourceProbe, wantAge: ms,
		},
		{
			name: "ORCA newer wins, inherits running from the scrape",
			steps: []step{
				{report: load(SourceScrape, 0, 8, 10, 0.9), accepted: true},
				{report: orcaKV(5*ms, 1, 0.3), accepted: true},
			},
			now:       5 * ms,
			wantQueue: 9, wantKV: 0.3, wantSource: SourceORCA,
		},
		{
			name: "ORCA KV only keeps the queue of the scrape",
			steps: []step{
				{report: load(SourceScrape, 0, 8, 10, 0.9), accepted: true},
				{report: orcaKV(5*ms, -1, 0.3), accepted: true},
			},
			dispatch:  2,
			now:       5 * ms,
			wantQueue: 20, wantKV: 0.3, wantSource: SourceORCA, wantCorr: 2,
		},
		{
			name: "/load probe does not inherit running/waiting, keeps KV",
			steps: []step{
				{report: load(SourceScrape, 0, 8, 10, 0.9), accepted: true},
				{report: srvLoad(ms, 4), accepted: true},
			},
			now:       ms,
			wantQueue: 4, wantKV: 0.9, wantSource: SourceProbe,
		},
		{
			name: "stale report: local",
			steps: []step{
				{dispatch: 5, report: load(SourceScrape, 0, 20, 20, 0.9), accepted: true},
			},
			finish: 1, now: stale,
			wantQueue: 4, wantKV: -1, wantSource: SourceLocal,
		},
		{
			name: "correction adds dispatched since the report",
			steps: []step{
				{dispatch: 4, finish: 1, report: load(SourceScrape, 0, 3, 0, 0.4), accepted: true},
			},
			dispatch: 3, now: 10 * ms,
			wantQueue: 6, wantKV: 0.4, wantSource: SourceScrape, wantCorr: 3, wantAge: 10 * ms,
		},
		{
			name: "correction subtracts finished since the report",
			steps: []step{
				{dispatch: 4, report: load(SourceProbe, 0, 3, 1, -1), accepted: true},
			},
			dispatch: 1, finish: 3, now: 10 * ms,
			wantQueue: 2, wantKV: -1, wantSource: SourceProbe, wantCorr: -2, wantAge: 10 * ms,
		},
		{
			name: "corrected queue floors at our own in-flight count",
			steps: []step{
				{dispatch: 6, report: load(SourceScrape, 0, 1, 0, 0.1), accepted: true},
			},
			finish: 5, now: 10 * ms,
			wantQueue: 1, wantKV: 0.1, wantSource: SourceScrape, wantCorr: -5, wantAge: 10 * ms,
		},
		{
			name: "new report resets the correction base",
			steps: []step{
				{dispatch: 6, report: load(SourceScrape, 0, 1, 0, 0.1), accepted: true},
				{dispatch: 2, report: load(SourceProbe, ms, 7, 0, 0.1), accepted: true},
			},
			dispatch: 1, now: 2 * ms,
			wantQueue: 9, wantKV: 0.1, wantSource: SourceProbe, wantCorr: 1, wantAge: ms,
		},
		{
			name: "others' load in the report exceeds our in-flight count",
			steps: []step{
				{dispatch: 1, report: load(SourceProbe, 0, 7, 3, 0.2), accepted: true},
			},
			dispatch: 2, now: ms,
			wantQueue: 12, wantKV: 0.2, wantSource: SourceProbe, wantCorr: 2, wantAge: ms,
		},
		{
			name:      "KV-only ORCA with nothing before: queue falls back to in-flight",
			steps:     []step{{dispatch: 2, report: orcaKV(0, -1, 0.3), accepted: true}},
			now:       ms,
			wantQueue: 2, wantKV: 0.3, wantSource: SourceORCA, wantAge: ms,
		},
		{
			name:      "report from the future: age 0",
			steps:     []step{{report: load(SourceProbe, time.Second, 1, 1, 0.5), accepted: true}},
			now:       0,
			wantQueue: 2, wantKV: 0.5, wantSource: SourceProbe,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewState("10.0.0.1:8000")
			for i, st := range tt.steps {
				for range st.dispatch {
					s.Dispatch()
				}
				for range st.finish {
					s.Finish()
				}
				if st.report != nil {
					if got := s.Report(st.report); got != st.accepted {
						t.Fatalf("step %d: Report = %v, want %v", i, got, st.accepted)
					}
				}
			}
			for range tt.dispatch {
				s.Dispatch()
			}
			for range tt.finish {
				s.Finish()
			}
			v := s.View(t0.Add(tt.now), stale)
			if v.Queue != tt.wantQueue || v.KVUse != tt.wantKV || v.Source != tt.wantSource || v.Correction != tt.wantCorr || v.Age != tt.wantAge {
				t.Errorf("View = %+v\nwant Queue %v KV %v Source %v Correction %d Age %v", v, tt.wantQueue, tt.wantKV, tt.wantSource, tt.wantCorr, tt.wantAge)
			}
			if v.Inflight != s.Inflight() {
				t.Errorf("Inflight %d != %d", v.Inflight, s.Inflight())
			}
		})
	}
}

func TestStateReportCopiesAndInheritsLoRA(t *testing.T) {
	s := NewState("a:1")
	l := load(SourceScrape, 0, 1, 1, 0.5)
	l.MaxLoRA, l.RunningLoRAs, l.WaitingLoRAs = 4, []string{"a"}, []string{"b"}
	s.Report(l)
	l.Running = 99 // the caller may reuse its Load
	if s.Latest().Running != 1 {
		t.Fatal("Report did not copy")
	}
	s.Report(load(SourceORCA, time.Millisecond, -1, 2, 0.6))
	got := s.Latest()
	if got.Running != 1 || got.Waiting != 2 || got.KVUse != 0.6 || got.MaxLoRA != 4 || !slices.Equal(got.RunningLoRAs, []string{"a"}) || got.Source != SourceORCA {
		t.Errorf("merged = %+v", got)
	}
	v := s.View(t0.Add(time.Millisecond), time.Second)
	if v.MaxLoRA != 4 || !slices.Equal(v.WaitingLoRAs, []string{"b"}) {
		t.Errorf("view lora = %+v", v)
	}
}

func TestStateAccessors(t *testing.T) {
	s := NewState("h:9")
	if s.Addr() != "h:9" || s.Latest() != nil || s.Inflight() != 0 || s.Dispatched() != 0 {
		t.Fatal("fresh state not empty")
	}
	s.Dispatch()
	s.Dispatch()
	s.Finish()
	if s.Inflight() != 1 || s.Dispatched() != 2 {
		t.Fatalf("inflight %d dispatched %d", s.Inflight(), s.Dispatched())
	}
}

// TestStateConcurrent runs reporters, dispatchers and viewers together under
// -race: the newest At must win and in-flight must never go negative.
func TestStateConcurrent(t *testing.T) {
	s := NewState("h:1")
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 500 {
				s.Report(load(Source(1+w%3), time.Duration(i*4+w), i, 0, 0.1))
			}
		})
		wg.Go(func() {
			for range 500 {
				s.Dispatch()
				if v := s.View(t0, time.Hour); v.Queue < 0 || v.Inflight < 0 {
					t.Error("negative view")
				}
				s.Finish()
			}
		})
	}
	wg.Wait()
	if at := s.Latest().At; !at.Equal(t0.Add(499*4 + 3)) {
		t.Errorf("latest At = %v", at.Sub(t0))
	}
	if s.Inflight() != 0 {
		t.Errorf("inflight %d", s.Inflight())
	}
}

func BenchmarkView(b *testing.B) {
	s := NewState("h:1")
	l := load(SourceScrape, 0, 3, 1, 0.4)
	l.RunningLoRAs = []string{"a"}
	s.Report(l)
	s.Dispatch()
	now := t0.Add(time.Millisecond)
	b.ReportAllocs()
	for b.Loop() {
		if v := s.View(now, time.Second); v.Queue != 5 {
			b.Fatal(v.Queue)
		}
	}
}

func BenchmarkReport(b *testing.B) {
	s := NewState("h:1")
	l := load(SourceORCA, 0, -1, 1, 0.4)
	b.ReportAllocs()
	for b.Loop() {
		l.At = l.At.Add(1)
		s.Report(l)
	}
}

// ProgressedSince holds only when two reports taken after t show the token
// counter advancing: not for an advance that straddles t, not for a
// counter that stopped, and reports without a counter (ORCA) neither erase
// nor fake it.
func TestStateProgressedSince(t *testing.T) {
	ms := time.Millisecond
	tok := func(at time.Duration, n float64) *Load {
		l := Unknown(t0.Add(at), SourceScrape)
		l.Running, l.Tokens = 1, n
		return &l
	}
	orca := func(at time.Duration) *Load { return load(SourceORCA, at, -1, 0, 0.5) }
	s := NewState("a:1")
	if s.ProgressedSince(t0) {
		t.Fatal("progress with no report")
	}
	s.Report(tok(0, 100))
	s.Report(tok(50*ms, 200)) // advanced over (0, 50ms]
	if !s.ProgressedSince(t0) || s.ProgressedSince(t0.Add(ms)) {
		t.Fatal("an advance counts exactly from the report before it")
	}
	s.Report(tok(100*ms, 200)) // stopped
	s.Report(orca(120 * ms))   // no counter: carries what is known
	s.Report(tok(150*ms, 200))
	if s.ProgressedSince(t0.Add(10 * ms)) {
		t.Error("a stopped counter shows progress after its last advance")
	}
	if !s.ProgressedSince(t0) {
		t.Error("the advance before the stop was forgotten")
	}
	s.Report(tok(200*ms, 250)) // advanced over (150ms, 200ms]
	if !s.ProgressedSince(t0.Add(150 * ms)) {
		t.Error("an advance across an ORCA report was not seen")
	}
	if s.ProgressedSince(t0.Add(151 * ms)) {
		t.Error("an advance that straddles t counts")
	}
	// A restarted pod's counter falls back: that is no progress, the next
	// advance from its new value is.
	s.Report(tok(250*ms, 10))
	if s.ProgressedSince(t0.Add(200 * ms)) {
		t.Error("a counter reset counts as progress")
	}
	s.Report(tok(300*ms, 20))
	if !s.ProgressedSince(t0.Add(250 * ms)) {
		t.Error("progress after a counter reset is not seen")
	}
}

// A long prompt prefilling alone moves no token counter (vLLM counts it at
// its first token), only the KV-cache use its chunks allocate: a change
// of it between two /metrics reports taken after t is progress; a KV use
// standing still is none, nor is an ORCA header's KV use that differs.
func TestStateProgressedSinceKVUse(t *testing.T) {
	ms := time.Millisecond
	metrics := func(at time.Duration, tokens, kv float64) *Load {
		l := load(SourceScrape, at, 1, 0, kv)
		l.Tokens = tokens
		return l
	}
	orca := func(at time.Duration, kv float64) *Load { return load(SourceORCA, at, -1, 0, kv) }
	s := NewState("a:1")
	s.Report(metrics(0, 100, 0.25))
	s.Report(metrics(50*ms, 100, 0.25))
	s.Report(orca(60*ms, 0.5))
	s.Report(metrics(70*ms, 100, 0.25))
	if s.ProgressedSince(t0) {
		t.Fatal("standing counters and KV use (an ORCA header's aside) show progress")
	}
	s.Report(metrics(100*ms, 100, 0.3125)) // a chunk's blocks over (70ms, 100ms]
	if !s.ProgressedSince(t0.Add(70 * ms)) {
		t.Error("the KV use growing under standing counters is not progress")
	}
	if s.ProgressedSince(t0.Add(71 * ms)) {
		t.Error("a KV change that straddles t counts")
	}
	// A pod that has counted no token yet (its first prompt still in
	// prefill) shows it too.
	fresh := NewState("b:1")
	fresh.Report(metrics(0, 0, 0))
	fresh.Report(metrics(50*ms, 0, 0.0625))
	if !fresh.ProgressedSince(t0) {
		t.Error("a fresh pod's first prefill is not progress")
	}
}
