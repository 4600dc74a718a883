package route

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/probe"
)

// silentProber is a Prober whose probes all go unanswered at once: the
// probe picker then decides on what it already knew, without the network.
type silentProber struct{}

func (silentProber) Run(_ context.Context, cands, _ []*probe.State) probe.Result {
	return probe.Result{Probed: len(cands)}
}

// benchPicker builds the picker of policy pol over n backends the way a
// simulator does (NewBackend, NewPool, NewPicker): no Proxy, so no
// scraper, prober or other background goroutine runs while it is measured,
// and a frozen clock. Every backend carries a report taken at reportAt.
func benchPicker(b *testing.B, pol string, n int, reportAt time.Time) (Picker, *Scratch) {
	b.Helper()
	pool, bs := testPool(n)
	for i, be := range bs {
		l := probe.Load{Running: i % 7, Waiting: i % 3, KVUse: float64(i%10) / 10, ServerLoad: -1, At: reportAt, Source: probe.SourceScrape}
		be.State().Report(&l)
	}
	pc := testPickerConfig(pol)
	pc.D = 2 // the d these figures were taken with; route.d auto samples 4 from config.LargePool backends
	pk := mustPicker(b, pc, pool, Deps{Memory: &Memory{}, Rand: seeded(1), Now: pickNow, Prober: silentProber{}})
	return pk, NewScratch()
}

// BenchmarkPickers measures one Pick of every policy over 8, 64 and 512
// backends with config.Default()'s picker settings (d=2), built without a
// Proxy: unlike BenchmarkPick, nothing else runs in the process, so
// allocs/op is the picker's own (it must be 0). Every backend has a fresh
// report, so the probe policy skips probing (skipped_fresh); the
// probe/reports=stale cases make it call the prober (a silent one) and fall
// back to what it knew.
func BenchmarkPickers(b *testing.B) {
	type tc struct {
		pol, label string
		at         time.Time
	}
	var cases []tc
	for _, pol := range config.Policies() {
		cases = append(cases, tc{pol, "", pickT0})
	}
	stale := pickT0.Add(-time.Hour) // older than scrape.stale_after
	cases = append(cases, tc{config.PolicyProbe, "/reports=stale", stale})
	for _, c := range cases {
		for _, n := range []int{8, 64, 512} {
			b.Run(fmt.Sprintf("policy=%s%s/backends=%d", c.pol, c.label, n), func(b *testing.B) {
				pk, s := benchPicker(b, c.pol, n, c.at)
				benchPicks(b, pk, &RequestInfo{}, s)
			})
		}
	}
}

// benchPicks measures pk picking for info with s. The first pick, before
// the clock starts, grows the scratch space to the pool's size (cached
// scores every backend); requests reuse it, so allocs/op is the steady
// state's.
func benchPicks(b *testing.B, pk Picker, info *RequestInfo, s *Scratch) {
	b.Helper()
	ctx := context.Background()
	if _, _, err := pk.Pick(ctx, info, nil, s); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := pk.Pick(ctx, info, nil, s); err != nil {
			b.Fatal(err)
		}
	}
}
