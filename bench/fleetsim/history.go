package fleetsim

import "github.com/probegate/probegate/internal/vllmsim"

// Pods' earlier lives (Config.History). By default every pod starts fresh:
// its counters at 0, as a pod started with the run. A long-lived pod
// carries the sums of everything it prefilled before a proxy first scrapes
// it; Config.History gives each pod such a past: the history jobs are
// dealt over the pods by vllmsim.DealHistory (in proportion to their
// speed, or round robin with Config.HistoryRoundRobin), each pod's share
// replayed open loop through a private engine of that pod's configuration
// and speed (vllmsim.RunHistory) before the run, and the resulting prefill
// counters are added to every report the pod gives. The pod's engine
// itself starts idle and empty: the history ended before the run begins.
// The live bench gives its simulators the same past (bench -pod-history).

// historyTotals plays each pod's share of jobs and returns its prefill
// counters (virtual seconds and computed tokens), indexed by pod.
func historyTotals(cfg *Config, podCfg func(i int) (vllmsim.Config, float64), jobs []Job) ([][2]float64, error) {
	out := make([][2]float64, cfg.Pods)
	if len(jobs) == 0 {
		return out, nil
	}
	reqs := make([]vllmsim.HistoryRequest, len(jobs))
	for j, jb := range jobs {
		reqs[j] = vllmsim.HistoryRequest{At: jb.At, Prompt: jb.Prompt, MaxTokens: jb.MaxTokens}
	}
	weights := make([]float64, cfg.Pods)
	for i := range weights {
		weights[i] = 1
		if i < len(cfg.PodSlowdown) {
			weights[i] = max(cfg.PodSlowdown[i], 1)
		}
	}
	for i, share := range vllmsim.DealHistory(reqs, weights, cfg.HistoryRoundRobin) {
		pc, slow := podCfg(i)
		st, err := vllmsim.RunHistory(pc, slow, share)
		if err != nil {
			return nil, err
		}
		out[i] = [2]float64{st.PrefillTime.Sum, st.PrefillComputed.Sum}
	}
	return out, nil
}
