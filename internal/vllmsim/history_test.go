package vllmsim

import (
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// historyReqs is n 2,000-token prompts every gap, 4 output tokens each.
func historyReqs(n int, gap time.Duration) []HistoryRequest {
	out := make([]HistoryRequest, n)
	for i := range out {
		out[i] = HistoryRequest{At: time.Duration(i) * gap, Prompt: Prompt{Tokens: 2000}, MaxTokens: 4}
	}
	return out
}

// TestRunHistoryServesEveryRequestAtThePodsSpeed: every request of the
// history is prefilled (the counters hold all their prompt tokens), and a
// pod twice as slow shows twice the prefill time for the same history
// (light load: the prefills do not overlap).
func TestRunHistoryServesEveryRequestAtThePodsSpeed(t *testing.T) {
	reqs := historyReqs(50, 500*time.Millisecond)
	fast, err := RunHistory(DefaultConfig(), 1, reqs)
	if err != nil {
		t.Fatal(err)
	}
	slow, err := RunHistory(DefaultConfig(), 2, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []Stats{fast, slow} {
		if st.PrefillComputed.Sum != 100_000 || st.PrefillTime.Count != 50 || st.FinishedLength != 50 {
			t.Fatalf("history of 50 x 2,000 tokens: %v tokens computed over %d prefills, %d finished", st.PrefillComputed.Sum, st.PrefillTime.Count, st.FinishedLength)
		}
	}
	if r := slow.PrefillTime.Sum / fast.PrefillTime.Sum; math.Abs(r-2) > 0.05 {
		t.Fatalf("prefill time slow/fast %.3f, want 2", r)
	}
}

// TestDealHistoryBySpeed: a pod twice as slow gets half the requests of
// each other pod; round robin gives every pod the same.
func TestDealHistoryBySpeed(t *testing.T) {
	reqs := historyReqs(700, time.Millisecond)
	got := DealHistory(reqs, []float64{1, 1, 1, 2}, false)
	if n := []int{len(got[0]), len(got[1]), len(got[2]), len(got[3])}; n[0] != 200 || n[1] != 200 || n[2] != 200 || n[3] != 100 {
		t.Fatalf("dealt by speed %v, want [200 200 200 100]", n)
	}
	got = DealHistory(reqs, []float64{1, 1, 1, 2}, true)
	if n := []int{len(got[0]), len(got[1]), len(got[2]), len(got[3])}; n[0] != 175 || n[3] != 175 {
		t.Fatalf("dealt round robin %v, want 175 each", n)
	}
}

// TestSetHistoryShowsInMetricsOnly: a server given a history reports its
// own counters plus the history's in /metrics, as a long-lived vLLM pod
// does, while State (what the bench measures the run by) counts the run
// alone.
func TestSetHistoryShowsInMetricsOnly(t *testing.T) {
	h, err := RunHistory(DefaultConfig(), 1, historyReqs(30, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, nil)
	s.SetHistory(h)
	c := newClient(t)
	resp, err := c.Post(s.URL()+"/v1/completions", "application/json",
		strings.NewReader(`{"model":"meta-llama/Llama-3.1-8B-Instruct","prompt":"`+strings.Repeat("tokens ", 800)+`","max_tokens":3,"ignore_eos":true}`))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	waitFor(t, func() bool { return s.State().Finished == 1 })
	own := s.Stats()
	resp, err = c.Get(s.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	tp := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := tp.TextToMetricFamilies(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	f := fams["vllm:request_prefill_kv_computed_tokens"]
	if f == nil || len(f.Metric) != 1 || f.Metric[0].Histogram == nil {
		t.Fatal("histogram vllm:request_prefill_kv_computed_tokens missing")
	}
	hist := f.Metric[0].Histogram
	if want := own.PrefillComputed.Sum + 60_000; hist.GetSampleSum() != want || hist.GetSampleCount() != 31 {
		t.Errorf("computed tokens %v over %d requests, want %v over 31 (the history's 60,000 over 30 plus the run's)", hist.GetSampleSum(), hist.GetSampleCount(), want)
	}
	pt := fams["vllm:prompt_tokens_total"]
	if pt == nil || pt.Metric[0].Counter.GetValue() != float64(own.PromptTokens)+60_000 {
		t.Errorf("vllm:prompt_tokens_total does not carry the history's 60,000 tokens")
	}
	if st := s.State(); st.Finished != 1 {
		t.Errorf("State counts %d finished, want the run's 1 alone", st.Finished)
	}
}
