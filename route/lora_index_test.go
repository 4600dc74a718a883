package route

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/probe"
)

// loraFleet is n backends serving base model "base" with 4 adapter slots,
// each running one of 8 common adapters, and a request for adapter
// "rare-lora", which only backend n-1 reports running when loaded is true.
func loraFleet(tb testing.TB, n int, loaded bool) (Picker, *Memory, []*Backend, *RequestInfo) {
	return loraFleetViews(tb, n, loaded, nil)
}

// loraFleetViews is loraFleet reading views through views (nil: the
// backends' states).
func loraFleetViews(tb testing.TB, n int, loaded bool, views ViewSource) (Picker, *Memory, []*Backend, *RequestInfo) {
	tb.Helper()
	pool, bs := testPool(n)
	for i, b := range bs {
		l := probe.Load{Running: 2, Waiting: 0, KVUse: 0.3, ServerLoad: -1, At: pickT0, Source: probe.SourceScrape,
			BaseModel: "base", MaxLoRA: 4, RunningLoRAs: []string{fmt.Sprintf("lora-%d", i%8)}}
		if loaded && i == n-1 {
			l.RunningLoRAs = []string{"rare-lora"}
		}
		b.state.Report(&l)
	}
	mem := &Memory{}
	// Some backend's report has shown this proxy that lora-* are adapters.
	v := bs[0].state.View(pickT0, 0)
	mem.learnAdapters(&v, bs[0])
	pc := testPickerConfig(config.PolicyProbe)
	pk := mustPicker(tb, pc, pool, Deps{Memory: mem, Rand: seeded(3), Now: pickNow, Prober: idleProber{}, Views: views})
	info := &RequestInfo{JSON: true, Model: []byte("rare-lora"), ModelHash: xxhash.Sum64String("rare-lora"), PromptTokens: 200, MaxTokens: 32}
	return pk, mem, bs, info
}

// BenchmarkPickLoRA is a pick for an adapter request: the adapter loaded
// on one backend of the pool (reported), or on none (the request needs a
// free slot).
func BenchmarkPickLoRA(b *testing.B) {
	for _, loaded := range []bool{true, false} {
		for _, n := range []int{16, 64, 1024} {
			b.Run(fmt.Sprintf("loaded=%t/backends=%d", loaded, n), func(b *testing.B) {
				pk, _, _, info := loraFleet(b, n, loaded)
				benchPicks(b, pk, info, NewScratch())
			})
		}
	}
}

// pickIndex picks for info and returns the chosen backend's position in bs.
func pickIndex(t *testing.T, pk Picker, info *RequestInfo, s *Scratch, bs []*Backend) int {
	t.Helper()
	b, _, err := pk.Pick(context.Background(), info, nil, s)
	if err != nil {
		t.Fatal(err)
	}
	for i := range bs {
		if bs[i] == b {
			return i
		}
	}
	t.Fatal("picked a backend not in the pool")
	return -1
}

// An adapter this router sent to one backend of a 1,024-backend pool is
// sent there again: the adapter index finds the backend without a scan of
// the pool (a bounded scan alone would find it 16 times in 1,024).
func TestAdapterDispatchedFoundInLargePool(t *testing.T) {
	pk, mem, bs, info := loraFleet(t, 1024, false)
	const k = 517
	mem.NoteDispatch(bs[k], info, pickT0)
	s := NewScratch()
	for i := range 50 {
		if got := pickIndex(t, pk, info, s, bs); got != k {
			t.Fatalf("pick %d: backend %d, want %d (the adapter was sent there)", i, got, k)
		}
	}
}

// An adapter another router loaded on one backend (this router only sees
// it in that backend's report) is found once one of this router's bounded
// scans has read the report, and then on every pick: the scan learns what
// it reads into the index.
func TestAdapterReportedFoundInLargePool(t *testing.T) {
	pk, _, bs, info := loraFleet(t, 1024, true)
	k := len(bs) - 1
	s := NewScratch()
	first := -1
	for i := range 2000 {
		if got := pickIndex(t, pk, info, s, bs); got == k {
			first = i
			break
		}
	}
	if first < 0 {
		t.Fatal("backend reporting the adapter never found in 2,000 picks")
	}
	for i := range 50 {
		if got := pickIndex(t, pk, info, s, bs); got != k {
			t.Fatalf("pick %d after finding it at pick %d: backend %d, want %d", i, first, got, k)
		}
	}
	t.Logf("found at pick %d (expected about 1024/16 = 64)", first)
}

// The index never hands out a backend that no longer holds the adapter:
// once its report lists other adapters filling its slots and this router's
// dispatch is older than the LoRA window, a pick stops going there.
func TestAdapterIndexConfirmsHolder(t *testing.T) {
	pk, mem, bs, info := loraFleet(t, 1024, false)
	const k = 300
	mem.NoteDispatch(bs[k], info, pickT0.Add(-2*loraWindow))
	l := probe.Load{Running: 2, KVUse: 0.3, ServerLoad: -1, At: pickT0, Source: probe.SourceScrape,
		BaseModel: "base", MaxLoRA: 2, RunningLoRAs: []string{"lora-1", "lora-2"}}
	bs[k].state.Report(&l)
	s := NewScratch()
	for i := range 50 {
		if got := pickIndex(t, pk, info, s, bs); got == k {
			t.Fatalf("pick %d: backend %d, whose adapter slots are full and whose dispatch is stale", i, got)
		}
	}
}

// countingViews counts the views a picker reads.
type countingViews struct{ n *int }

func (c countingViews) View(b *Backend, now time.Time, staleAfter time.Duration) probe.View {
	*c.n++
	return b.state.View(now, staleAfter)
}

// An adapter pick in a 1,024-backend pool reads a few dozen views, not one
// per backend, whether the adapter is loaded somewhere or nowhere.
func TestAdapterPickReadsBoundedViews(t *testing.T) {
	for _, loaded := range []bool{true, false} {
		n := 0
		pk, _, bs, info := loraFleetViews(t, 1024, loaded, countingViews{&n})
		s := NewScratch()
		for range 20 {
			n = 0
			pickIndex(t, pk, info, s, bs)
			// affine: the index's holders + memoryScan; the memory slot:
			// memoryScan + 1; the d sampled candidates and their spares.
			if max := indexWays + 2*memoryScan + 1 + 8; n > max {
				t.Fatalf("loaded=%t: a pick read %d views, want at most %d", loaded, n, max)
			}
		}
	}
}

// An adapter pick reads a bounded number of backends whatever the pool's
// size and allocates nothing.
func TestAdapterPickAllocatesNothing(t *testing.T) {
	for _, loaded := range []bool{true, false} {
		pk, _, _, info := loraFleet(t, 1024, loaded)
		s := NewScratch()
		if a := testing.AllocsPerRun(200, func() { _, _, _ = pk.Pick(context.Background(), info, nil, s) }); a != 0 {
			t.Errorf("loaded=%t: %.1f allocs per pick, want 0", loaded, a)
		}
	}
}
