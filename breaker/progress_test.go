package breaker

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// CloseOnTrialProgress closes a half-open breaker while its trial is under
// way only when the evidence says the backend worked since the trial was
// admitted (it is given that time, on the breaker's clock); the trial's
// own outcome is then stale. Without a trial, or without progress, nothing
// changes.
func TestCloseOnTrialProgress(t *testing.T) {
	clk := newFakeClock()
	var rec recorder
	b := New("b", cfg(1, 1, time.Second), clk.now, rec.hook)
	never := func(time.Time) bool { return false }
	if b.CloseOnTrialProgress(func(time.Time) bool { return true }) {
		t.Fatal("closed a closed breaker")
	}
	report(t, b, Failure) // open
	clk.advance(2 * time.Second)
	if b.State() != HalfOpen {
		t.Fatalf("state %v, want half-open", b.State())
	}
	if b.CloseOnTrialProgress(func(time.Time) bool { return true }) {
		t.Fatal("closed a half-open breaker with no trial under way")
	}
	admitted := clk.now()
	trial, err := b.Allow()
	if err != nil || !trial.Trial() {
		t.Fatalf("no trial admitted: %v", err)
	}
	clk.advance(30 * time.Second) // a long non-stream generation
	if _, err := b.Allow(); !errors.Is(err, ErrOpen) {
		t.Fatalf("a second request admitted beside the trial: %v", err)
	}
	if b.CloseOnTrialProgress(never) {
		t.Fatal("closed without progress")
	}
	var since time.Time
	if !b.CloseOnTrialProgress(func(t time.Time) bool { since = t; return true }) {
		t.Fatal("did not close on progress")
	}
	if !since.Equal(admitted) {
		t.Errorf("progress asked since %v, want the trial's admission %v", since, admitted)
	}
	if b.State() != Closed {
		t.Fatalf("state %v after progress, want closed", b.State())
	}
	if _, err := b.Allow(); err != nil {
		t.Fatalf("closed breaker rejected: %v", err)
	}
	trial.Done(Failure) // the trial's late timeout: stale
	if b.State() != Closed {
		t.Fatalf("state %v after the trial's stale failure, want closed", b.State())
	}
	if got := strings.Join(rec.transitions(), ","); got != "closed>open,open>half-open,half-open>closed" {
		t.Errorf("transitions %s", got)
	}
}

// TrialUnderWay is true exactly while a half-open breaker's trial is
// admitted and undecided.
func TestTrialUnderWay(t *testing.T) {
	clk := newFakeClock()
	b := New("b", cfg(1, 1, time.Second), clk.now, nil)
	if b.TrialUnderWay() {
		t.Fatal("closed breaker has a trial")
	}
	report(t, b, Failure)
	clk.advance(2 * time.Second)
	if b.State() != HalfOpen || b.TrialUnderWay() {
		t.Fatalf("half-open before any trial: state %v, trial %v", b.State(), b.TrialUnderWay())
	}
	trial, _ := b.Allow()
	if !b.TrialUnderWay() {
		t.Fatal("no trial under way after Allow admitted one")
	}
	trial.Done(Ignore) // the slot is free again
	if b.TrialUnderWay() {
		t.Fatal("trial under way after it was ignored")
	}
}
