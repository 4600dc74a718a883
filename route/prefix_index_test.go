package route

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/probe"
)

// promptInfo returns a request of n prefix blocks: blocks[i] = base+i+1
// (distinct per prompt and position, as chained hashes are).
func promptInfo(base uint64, n int) *RequestInfo {
	info := &RequestInfo{NBlocks: n, PromptTokens: n * 64}
	for i := range n {
		info.Blocks[i] = base + uint64(i) + 1
	}
	return info
}

// prefixOf returns info cut to its first n blocks, as a shorter prompt
// sharing its prefix would hash.
func prefixOf(info *RequestInfo, n int) *RequestInfo {
	c := *info
	c.NBlocks = n
	return &c
}

// name returns b's address, or "none".
func name(b *Backend) string {
	if b == nil {
		return "none"
	}
	return b.Addr()
}

// probeOver returns the probe picker (no prober: it scores its sample on
// views) over bs with views, and its Memory. Seed 0 is the default,
// concurrency-safe random source.
func probeOver(t *testing.T, bs []*Backend, views ViewSource, seed uint64) (*probePicker, *Memory) {
	t.Helper()
	mem := &Memory{}
	var r Rand
	if seed != 0 {
		r = seeded(seed)
	}
	pk := mustPicker(t, testPickerConfig(config.PolicyProbe), NewPool(bs), Deps{Memory: mem, Rand: r, Now: pickNow, Views: views})
	return pk.(*probePicker), mem
}

// pickAlways picks for info n times with pk and fails unless every pick
// is want (described by why).
func pickAlways(t *testing.T, pk Picker, info *RequestInfo, n int, want *Backend, why string) {
	t.Helper()
	s := NewScratch()
	for range n {
		b, _, err := pk.Pick(context.Background(), info, nil, s)
		if err != nil {
			t.Fatal(err)
		}
		if b != want {
			t.Fatalf("picked %s, want %s, %s", name(b), want.Addr(), why)
		}
	}
}

// equalViews gives every backend the same fresh, known load.
type equalViews struct{}

func (equalViews) View(*Backend, time.Time, time.Duration) probe.View {
	return probe.View{Queue: 1, KVUse: 0.2, Source: probe.SourceScrape}
}

// In a 1,024-backend pool the probe policy finds the one backend holding a
// prompt's prefix (through the index, not a scan) and routes there when
// loads are equal; the longest holder wins over a shorter one, an excluded
// holder gives way to the next, and a prompt nobody was sent has none.
func TestPrefixHolderInLargePool(t *testing.T) {
	_, bs := testPool(1024)
	pk, mem := probeOver(t, bs, equalViews{}, 1)
	long := promptInfo(1000, 40)
	// b900 was sent the first 20 blocks (anchors 1, 2, 4, 8, 16, 20), b700
	// the first 3: the 40-block request finds b900 under its anchor 16.
	mem.NoteDispatch(bs[900], prefixOf(long, 20), pickNow())
	mem.NoteDispatch(bs[700], prefixOf(long, 3), pickNow())

	if got := holderAt(pk, long, nil); got != bs[900] {
		t.Fatalf("holder = %s, want b900 (20 blocks)", name(got))
	}
	if got := holderAt(pk, long, []*Backend{bs[900]}); got != bs[700] {
		t.Fatalf("holder with b900 excluded = %s, want b700", name(got))
	}
	if got := holderAt(pk, long, []*Backend{bs[900], bs[700]}); got != nil {
		t.Fatalf("holder with both excluded = %s, want none", name(got))
	}
	if got := holderAt(pk, promptInfo(5000, 40), nil); got != nil {
		t.Fatalf("holder of an unseen prompt = %s, want none", name(got))
	}
	pickAlways(t, pk, long, 20, bs[900], "the prefix holder")
}

// A prefix cached on several backends is offered from its least loaded
// holder, and spread over equally loaded ones, not always from the same
// one (which a scan in pool order did, piling the prefix's traffic on it).
func TestPrefixHolderSpreadsOverHolders(t *testing.T) {
	_, bs := testPool(64)
	views := fixedViews{}
	for _, b := range bs {
		views[b] = probe.View{Queue: 1, KVUse: 0.2, Source: probe.SourceScrape}
	}
	info := promptInfo(7000, 12)
	holders := []*Backend{bs[3], bs[17], bs[40], bs[61]}

	pk, mem := probeOver(t, bs, views, 2)
	for _, b := range holders {
		mem.NoteDispatch(b, info, pickNow())
	}
	count := map[*Backend]int{}
	for range 400 {
		count[holderAt(pk, info, nil)]++
	}
	for _, b := range holders {
		if n := count[b]; n < 60 {
			t.Errorf("%s offered %d of 400 times, want a fair share (100)", b.Addr(), n)
		}
	}

	for i, q := range []float64{3, 0, 2, 5} {
		views[holders[i]] = probe.View{Queue: q, KVUse: 0.2, Source: probe.SourceScrape}
	}
	for range 20 {
		if got := holderAt(pk, info, nil); got != holders[1] {
			t.Fatalf("holder = %s, want the idle one %s", name(got), holders[1].Addr())
		}
	}
}

// A shared prefix goes to the least loaded backend holding it: not to a
// loaded holder that the sample happened to offer, nor to an idle backend
// without it.
func TestPickSendsPrefixToIdleHolder(t *testing.T) {
	_, bs := testPool(8)
	views := fixedViews{}
	for _, b := range bs {
		views[b] = probe.View{Queue: 0, KVUse: 0.2, Source: probe.SourceScrape}
	}
	views[bs[0]] = probe.View{Queue: 2, KVUse: 0.2, Source: probe.SourceScrape}
	info := promptInfo(9000, 12)
	pk, mem := probeOver(t, bs, views, 5)
	mem.NoteDispatch(bs[0], info, pickNow())
	mem.NoteDispatch(bs[5], info, pickNow())
	pickAlways(t, pk, info, 200, bs[5], "the idle prefix holder")
}

// The index is only a hint: a backend it lists whose own prefix table does
// not hold the prefix (an entry torn by concurrent inserts, or evicted from
// the backend's table) is never offered, and an index too small to keep a
// prompt loses its holder rather than naming a wrong one.
func TestPrefixIndexIsConfirmedByTables(t *testing.T) {
	_, bs := testPool(8)
	pk, mem := probeOver(t, bs, equalViews{}, 3)
	mem.SizePrefixIndex(1)
	a, b := promptInfo(100, 8), promptInfo(200, 8)
	mem.prefixIndex().Insert(a.Blocks[:a.NBlocks], bs[2]) // listed, never sent
	if got := holderAt(pk, a, nil); got != nil {
		t.Fatalf("holder = %s, want none: its table does not hold the prefix", name(got))
	}
	mem.NoteDispatch(bs[5], a, pickNow())
	if got := holderAt(pk, a, nil); got != bs[5] {
		t.Fatalf("holder = %s, want b5", name(got))
	}
	mem.NoteDispatch(bs[6], b, pickNow()) // evicts a's only entry
	if got := holderAt(pk, a, nil); got != nil {
		t.Fatalf("holder of the evicted prompt = %s, want none", name(got))
	}
	if got := holderAt(pk, b, nil); got != bs[6] {
		t.Fatalf("holder = %s, want b6", name(got))
	}
}

// Concurrent dispatches and lookups (run with -race): every holder offered
// really holds the prefix.
func TestPrefixIndexConcurrent(t *testing.T) {
	_, bs := testPool(32)
	pk, mem := probeOver(t, bs, equalViews{}, 0)
	mem.SizePrefixIndex(64) // small: entries are contended and evicted
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				info := promptInfo(uint64(i%16)*100, 1+i%20)
				mem.NoteDispatch(bs[(g*7+i)%len(bs)], info, pickNow())
			}
		}()
	}
	bad := make(chan string, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				info := promptInfo(uint64(i%16)*100, 20)
				if b := holderAt(pk, info, nil); b != nil && b.prefix.Match(info.Blocks[:info.NBlocks]) == 0 {
					bad <- b.Addr()
					return
				}
			}
		}()
	}
	wg.Wait()
	close(bad)
	for a := range bad {
		t.Errorf("offered %s, which holds none of the prefix", a)
	}
}

func TestIsAnchor(t *testing.T) {
	var got []int
	for i := range 40 {
		if isAnchor(i, 40) {
			got = append(got, i+1)
		}
	}
	want := []int{1, 2, 4, 8, 16, 32, 40}
	if len(got) != len(want) {
		t.Fatalf("anchor depths of 40 blocks = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("anchor depths of 40 blocks = %v, want %v", got, want)
		}
	}
}

// holderAt is pk's prefixHolder at its clock's now, as Pick calls it.
func holderAt(pk *probePicker, info *RequestInfo, exclude []*Backend) *Backend {
	now := pk.sc.now()
	return pk.prefixHolder(info, exclude, now, now.Add(-pk.sc.pc.StaleAfter))
}
