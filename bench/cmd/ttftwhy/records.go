package main

import (
	"github.com/probegate/probegate/bench"
	"github.com/probegate/probegate/bench/fleetsim"
	"github.com/probegate/probegate/route"
)

// writeRecords writes one seed's fleetsim records as bench.ArrivalRecords
// (the live bench's -records schema) to dir.
func writeRecords(dir, entry, strategy string, seed int64, rs []*fleetsim.Record) error {
	var load route.LoadModel
	if cfg, err := bench.StrategyConfig(strategy, []string{"http://127.0.0.1:1"}); err == nil {
		load = route.PickerConfigFrom(cfg).Load
	}
	out := make([]bench.ArrivalRecord, 0, len(rs))
	for i, r := range rs {
		a := bench.ArrivalRecord{Src: "fleetsim", Strategy: strategy, Seed: seed, Index: i, AtMs: ms(r.At), Prompt: r.Prompt, Out: r.Out,
			Replica: r.Replica, Pod: r.Pod, TTFTMs: ms(r.TTFT), Pods: make([]bench.PodSnap, len(r.Pods))}
		for j, p := range r.Pods {
			a.Pods[j] = bench.PodSnap{Running: p.Running, Waiting: p.Waiting, ViewQueue: p.ViewQueue, ViewPrefill: p.ViewPrefill,
				ViewNs: p.ViewNs, ViewPodNs: p.ViewPodNs, ViewSamples: p.ViewSamples, ViewSeeded: p.ViewSeeded, ViewForeign: p.ViewForeign,
				ScoreNs: load.Ns(p.ViewNs, p.ViewPodNs, p.ViewSamples, load.Seeded(p.ViewSeeded, p.ViewForeign))}
		}
		out = append(out, a)
	}
	return bench.WriteRecords(dir, bench.RecordsName(entry, strategy, seed), out)
}
