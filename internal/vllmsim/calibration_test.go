package vllmsim

import (
	"testing"
	"time"
)

// TestCalibration prints TTFT and inter-token latency at batch sizes 1, 16, 64 and
// 128 (1,000-token prompts, 256 output tokens, all arriving at once) next to the
// public figures the defaults are calibrated on (see Config), and checks the two
// anchors: ITL ~6-8 ms at batch 1 and 10-15 ms at batch 64.
//
//	go test -run Calibration -v ./bench/vllmsim/
func TestCalibration(t *testing.T) {
	const prompt, output = 1000, 256
	t.Logf("Llama-3.1-8B / 1xH100 defaults: %d-token prompts, %d output tokens, all arriving at t=0", prompt, output)
	t.Logf("%6s %12s %12s %12s %12s %14s   %s", "batch", "TTFT first", "TTFT mean", "decode ITL", "ITL mean*", "output tok/s", "public figure")
	public := map[int]string{
		1:   "ITL ~6-8 ms single stream; 1k-token TTFT ~50-70 ms (prefill 10-20k tok/s)",
		16:  "-",
		64:  "decode step 10-15 ms at batch 64",
		128: "-",
	}
	for _, b := range []int{1, 16, 64, 128} {
		e := newTestEngine(t, nil)
		var reqs []*Request
		for i := range b {
			r := req(i, prompt, output)
			mustAdd(t, e, r)
			reqs = append(reqs, r)
		}
		var decodeSteps int
		var decodeTime time.Duration
		for !e.Idle() {
			res := e.Step()
			if res.PrefillTokens == 0 && res.DecodeSeqs == b {
				decodeSteps++
				decodeTime += res.Duration
			}
		}
		step := decodeTime / time.Duration(max(decodeSteps, 1))
		st := e.Stats()
		var first, sum time.Duration
		first = reqs[0].TTFT()
		for _, r := range reqs {
			sum += r.TTFT()
		}
		mean := sum / time.Duration(b)
		itl := time.Duration(st.ITL.Mean() * float64(time.Second))
		tput := float64(st.GenerationTokens) / e.Now().Seconds()
		t.Logf("%6d %12v %12v %12v %12v %14.0f   %s", b, first.Round(100*time.Microsecond), mean.Round(100*time.Microsecond),
			step.Round(10*time.Microsecond), itl.Round(10*time.Microsecond), tput, public[b])
		switch b {
		case 1:
			if step < 5*time.Millisecond || step > 9*time.Millisecond {
				t.Errorf("batch 1 decode ITL %v, want 6-8 ms", step)
			}
			if first < 50*time.Millisecond || first > 100*time.Millisecond {
				t.Errorf("1k-token TTFT %v, want 50-100 ms", first)
			}
		case 64:
			if step < 10*time.Millisecond || step > 15*time.Millisecond {
				t.Errorf("batch 64 decode ITL %v, want 10-15 ms", step)
			}
		}
	}
	t.Log("* ITL mean includes steps shared with other requests' chunked prefill (up to 8192 tokens)")
}
