package probe

import (
	"testing"
	"time"
)

// TestForeignShareCountsOnlyOtherClientsRequests: a backend's foreign
// share stays 0 while its reports show no more than this proxy's own
// requests in flight (including the moments a report lags this proxy's
// dispatches), a single report that catches one request this proxy has
// already seen end cannot reach a quarter, and reports showing other
// clients' requests drive it towards their share. Reports that carry no
// queue (a KV-only ORCA header, which inherits the last queue) or an empty
// one leave it as it was.
func TestForeignShareCountsOnlyOtherClientsRequests(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	at := t0
	report := func(s *State, running, waiting int) {
		t.Helper()
		at = at.Add(50 * time.Millisecond)
		l := Load{Running: running, Waiting: waiting, KVUse: 0.1, ServerLoad: -1, At: at, Source: SourceScrape}
		if !s.Report(&l) {
			t.Fatalf("report at %v dropped", at)
		}
	}

	// A lone proxy: the pod holds exactly its requests, or fewer (sent
	// but not registered yet, or finished at the pod and not yet here).
	lone := NewState("b:1")
	for i := range 40 {
		lone.Dispatch()
		report(lone, min(lone.Inflight(), 4), max(lone.Inflight()-4, 0))
		report(lone, max(lone.Inflight()-1, 0), 0)
		if i%3 == 0 {
			lone.Finish()
		}
	}
	if got := lone.ForeignShare(); got != 0 {
		t.Fatalf("lone proxy: foreign share %v after 80 reports of its own requests, want 0", got)
	}

	// One report that counts a request this proxy saw end (its client
	// went away; the pod still runs it): below a quarter.
	once := NewState("b:2")
	report(once, 1, 0)
	if got := once.ForeignShare(); got <= 0 || got >= 0.25 {
		t.Fatalf("one report of one foreign request among none of ours: share %v, want in (0, 0.25)", got)
	}

	// Seven other clients' requests for each of ours (8 equal replicas).
	shared := NewState("b:3")
	shared.Dispatch()
	for range 2 {
		report(shared, 4, 4)
	}
	if got := shared.ForeignShare(); got < 0.25 {
		t.Fatalf("two reports of 8 requests, 1 ours: share %v, want at least 0.25", got)
	}
	for range 30 {
		report(shared, 4, 4)
	}
	if got := shared.ForeignShare(); got < 0.85 || got > 0.875 {
		t.Fatalf("32 reports of 8 requests, 1 ours: share %v, want about 7/8", got)
	}
	before := shared.ForeignShare()
	at = at.Add(50 * time.Millisecond)
	orca := Load{Running: -1, Waiting: -1, KVUse: 0.3, ServerLoad: -1, At: at, Source: SourceORCA}
	shared.Report(&orca)
	report(shared, 0, 0)
	if got := shared.ForeignShare(); got != before {
		t.Fatalf("a KV-only report and an empty queue moved the share from %v to %v", before, got)
	}
	var b Brief
	shared.BriefInto(&b, at.Add(-time.Minute))
	if v := shared.View(at, time.Minute); v.ForeignShare != before || b.ForeignShare != before {
		t.Fatalf("View.ForeignShare %v, Brief's %v, want %v", v.ForeignShare, b.ForeignShare, before)
	}
	// The pod now holds only this proxy's requests: the share decays.
	for range 20 {
		report(shared, 1, 0)
	}
	if got := shared.ForeignShare(); got > 0.02 {
		t.Fatalf("after 20 reports of our one request alone: share %v, want about 0", got)
	}
}
