package probe

import (
	"math"
	"testing"
	"time"
)

// podReport is a scrape of a pod with prefill counters secs and toks at t0+at.
func podReport(at time.Duration, secs, toks float64) *Load {
	l := Unknown(t0.Add(at), SourceScrape)
	l.Running, l.Waiting = 0, 0
	l.PrefillSeconds, l.PrefillTokens = secs, toks
	return &l
}

// near reports whether got is within 1% of want.
func near(got, want float64) bool { return math.Abs(got-want) <= 0.01*want }

func TestPodSpeedOverlappingPrefillsDoNotLookSlow(t *testing.T) {
	// A pod prefilling 10,000 tokens a second (100 us a token), in two
	// regimes. Busy: every second 4 requests of 2,500 tokens are admitted
	// together and prefilled together, each taking the whole second, so
	// the per-request prefill times sum to 4 s a second: the naive ratio
	// would say 400 us a token. Light: one request of 5,000 tokens every
	// 2 s, prefilled alone in 0.5 s.
	cases := []struct {
		name              string
		secsPerS, tokPerS float64
	}{
		{"four overlapping prefills at a time", 4, 10000},
		{"one prefill at a time, idle between", 0.25, 2500},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := NewState("a:1")
			for sec := range 25 {
				s.Report(podReport(time.Duration(sec)*time.Second, float64(sec)*tc.secsPerS, float64(sec)*tc.tokPerS))
			}
			if ns := s.PodNsPerToken(); !near(ns, 100_000) {
				t.Fatalf("pod speed %.0f ns a token, want 100,000", ns)
			}
		})
	}
}

func TestPodSpeedNeedsALongWindow(t *testing.T) {
	s := NewState("a:1")
	// 3 s of reports: shorter than podSpeedWindow, nothing yet.
	for ms := 0; ms <= 3000; ms += 100 {
		s.Report(podReport(time.Duration(ms)*time.Millisecond, float64(ms)/1000, float64(ms)*10))
	}
	if ns := s.PodNsPerToken(); ns != 0 {
		t.Fatalf("pod speed %v after 3 s, want none yet", ns)
	}
	// 100 tokens a second: the window grows until it holds
	// podSpeedTokens of prefill work.
	s = NewState("a:1")
	for sec := range 201 {
		s.Report(podReport(time.Duration(sec)*time.Second, float64(sec)*0.01, float64(sec)*100))
		if sec == 150 && s.PodNsPerToken() != 0 {
			t.Fatalf("pod speed %v after 15,000 tokens, want none yet", s.PodNsPerToken())
		}
	}
	if ns := s.PodNsPerToken(); !near(ns, 100_000) {
		t.Fatalf("pod speed %.0f ns a token after 20,000 tokens in 200 s, want 100,000", ns)
	}
}

func TestPodSpeedSurvivesReportsWithoutCounters(t *testing.T) {
	s := NewState("a:1")
	for sec := range 20 {
		s.Report(podReport(time.Duration(sec)*time.Second, float64(sec), float64(sec)*10000))
		// An ORCA header and a /load answer in between know no counters.
		o := Load{Running: -1, Waiting: 2, KVUse: 0.5, ServerLoad: -1, At: t0.Add(time.Duration(sec)*time.Second + 300*time.Millisecond), Source: SourceORCA}
		s.Report(&o)
		ld := Unknown(t0.Add(time.Duration(sec)*time.Second+600*time.Millisecond), SourceProbe)
		ld.ServerLoad = 3
		s.Report(&ld)
	}
	if ns := s.PodNsPerToken(); !near(ns, 100_000) {
		t.Fatalf("pod speed %.0f ns a token, want 100,000", ns)
	}
	v := s.View(t0.Add(time.Hour), time.Second)
	if v.Source != SourceLocal || !near(v.PodNsPerToken, 100_000) {
		t.Fatalf("stale view: source %v, pod speed %v; want local with the speed kept", v.Source, v.PodNsPerToken)
	}
	var b Brief
	s.BriefInto(&b, t0.Add(time.Hour-time.Second))
	if b.PodNsPerToken != v.PodNsPerToken {
		t.Fatalf("brief pod speed %v, view %v", b.PodNsPerToken, v.PodNsPerToken)
	}
}

func TestPodSpeedRestartAndHostileCounters(t *testing.T) {
	s := NewState("a:1")
	at := time.Duration(0)
	report := func(secs, toks float64) {
		at += time.Second
		s.Report(podReport(at, secs, toks))
	}
	for sec := range 12 {
		report(float64(sec), float64(sec)*10000) // 100 us a token
	}
	want := s.PodNsPerToken()
	if !near(want, 100_000) {
		t.Fatalf("pod speed %.0f, want 100,000", want)
	}
	// The server restarts: its counters start over from 0. No window
	// spans the restart; the estimate is kept and later windows count.
	for sec := range 12 {
		report(float64(sec)/2, float64(sec)*10000) // now 50 us a token
	}
	if got := s.PodNsPerToken(); got >= want || got < 50_000 {
		t.Fatalf("after a restart at twice the speed: %.0f ns, want between 50,000 and %.0f", got, want)
	}
	// Garbage: a jump of 1e12 tokens (a pod claiming a million times the
	// speed), NaN and infinite counters. None moves the estimate.
	before := s.PodNsPerToken()
	report(100, 1e12)
	for range 6 {
		report(math.NaN(), 1e13)
		report(math.Inf(1), math.Inf(1))
		report(-5, 2e13)
	}
	if got := s.PodNsPerToken(); got != before {
		t.Fatalf("hostile counters moved the pod speed: %v -> %v", before, got)
	}
	// And the estimate resumes from honest counters.
	for sec := range 40 {
		report(1e3+float64(sec)/2, 2e13+float64(sec)*10000)
	}
	if got := s.PodNsPerToken(); !near(got, 50_000) {
		t.Fatalf("after the garbage: %.0f ns, want 50,000", got)
	}
}

func TestPodSpeedFollowsAChange(t *testing.T) {
	s := NewState("a:1")
	secs, toks := 0.0, 0.0
	for sec := range 60 {
		rate := 10000.0 // tokens a second, busy throughout
		if sec >= 30 {
			rate = 5000 // the pod slows down to half its speed
		}
		secs, toks = secs+1, toks+rate
		s.Report(podReport(time.Duration(sec+1)*time.Second, secs, toks))
		if sec == 29 && !near(s.PodNsPerToken(), 100_000) {
			t.Fatalf("before the change: %.0f ns", s.PodNsPerToken())
		}
	}
	if got := s.PodNsPerToken(); !near(got, 200_000) {
		t.Fatalf("30 s after the pod halved its speed: %.0f ns, want 200,000", got)
	}
}

// TestPodSpeedSeededFromALongLivedPodsFirstReport: a proxy that starts in
// front of a pod that has served for an hour reads, in its first scrape,
// the counters of everything the pod prefilled: that is a speed at once,
// before any window. A pod started moments ago (counters below
// podSpeedTokens) gives none until a window has passed.
func TestPodSpeedSeededFromALongLivedPodsFirstReport(t *testing.T) {
	s := NewState("a:1")
	// An hour's life: 36,000,000 tokens prefilled in 3,600 s of
	// per-request prefill time: 100 us a token.
	s.Report(podReport(0, 3600, 36_000_000))
	if ns := s.PodNsPerToken(); !near(ns, 100_000) {
		t.Fatalf("long-lived pod's first report: speed %.0f ns a token, want 100,000 from its lifetime counters", ns)
	}
	var b Brief
	s.BriefInto(&b, t0.Add(-time.Minute))
	if v := s.View(t0, time.Minute); !v.PodSeeded || !b.PodSeeded {
		t.Fatalf("long-lived pod: View.PodSeeded %v, Brief.PodSeeded %v, want true", v.PodSeeded, b.PodSeeded)
	}
	// Windows then move it as before (EWMA 0.5): 5 s at 200 us a token.
	s.Report(podReport(5*time.Second, 3605, 36_025_000))
	if ns := s.PodNsPerToken(); !near(ns, 150_000) {
		t.Fatalf("after a 5 s window at 200,000 ns a token: %.0f, want 150,000 (the seed and the window, weight 0.5)", ns)
	}

	young := NewState("b:1")
	young.Report(podReport(0, 1, 10_000))
	if ns := young.PodNsPerToken(); ns != 0 {
		t.Fatalf("pod with 10,000 tokens in its life: speed %v at the first report, want none (below podSpeedTokens)", ns)
	}
	// Its first window (5 s, 20,000 tokens at 100 us) gives a speed, not a seed.
	young.Report(podReport(5*time.Second, 3, 30_000))
	if v := young.View(t0.Add(5*time.Second), time.Minute); !near(v.PodNsPerToken, 100_000) || v.PodSeeded {
		t.Fatalf("young pod after a window: speed %v seeded %v, want 100,000 not seeded", v.PodNsPerToken, v.PodSeeded)
	}
	// A pod first read with its counters at 0 (started with this proxy)
	// is not long-lived, even once its counters hold more than
	// podSpeedTokens a scrape later: no seed, a speed only after a window.
	fresh := NewState("d:1")
	fresh.Report(podReport(0, 0, 0))
	fresh.Report(podReport(time.Second, 2, 20_000))
	if v := fresh.View(t0.Add(time.Second), time.Minute); v.PodNsPerToken != 0 || v.PodSeeded {
		t.Fatalf("pod first read at 0 counters, then 20,000 tokens: speed %v seeded %v, want none until a window", v.PodNsPerToken, v.PodSeeded)
	}
	hostile := NewState("c:1")
	hostile.Report(podReport(0, 1e-9, 1e12)) // a million million tokens in a nanosecond
	if ns := hostile.PodNsPerToken(); ns != 0 {
		t.Fatalf("lifetime counters claiming %v ns a token: taken, want dropped as garbage", ns)
	}
}
