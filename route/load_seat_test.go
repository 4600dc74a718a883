package route

import (
	"context"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/probe"
)

// seatPool returns two backends that report the same load (2 running, 0
// waiting, fresh) and have each streamed one completed 101-token answer
// through this proxy at 10 ms per token, so both learned that decode
// speed. Then the proxy's two requests in flight at each are past their
// first byte: at backend 0 both started 2 s ago expecting 220 tokens
// (about 0.2 s of decode left each), at backend 1 both started just now
// expecting 220 tokens (2.2 s left each). Same request counts, same
// prefill; only the seat time the decodes still hold differs.
func seatPool(t *testing.T, mem *Memory) (*Pool, []*Backend) {
	t.Helper()
	pool, bs := testPool(2)
	info := RequestInfo{Stream: true, IgnoreEOS: true, MaxTokens: 101, PromptTokens: 300}
	for _, b := range bs {
		// One stream 3 s ago: its last byte 100 tokens after its first.
		start := pickT0.Add(-3 * time.Second)
		w := mem.beginWork(&info, b, 256, 128, start)
		w.sawBytes(b, []byte("data: {}\n\n"), start.Add(50*time.Millisecond))
		w.sawBytes(b, []byte("data: {}\n\n"), start.Add(50*time.Millisecond+time.Second))
		mem.endWork(b, &w, true)
		if ns, seat := b.State().DecodeNs(), b.State().SeatNs(pickT0); ns < 9e6 || ns > 11e6 || seat != 0 {
			t.Fatalf("learned decode speed %v ns per token, seat time %v; want 1e7, 0", ns, seat)
		}
	}
	long := RequestInfo{Stream: true, IgnoreEOS: true, MaxTokens: 220, PromptTokens: 300}
	for i, b := range bs {
		first := pickT0
		if i == 0 {
			first = pickT0.Add(-2 * time.Second)
		}
		for range 2 {
			w := mem.beginWork(&long, b, 256, 128, first.Add(-20*time.Millisecond))
			b.State().Dispatch()
			w.sawBytes(b, []byte("data: {}\n\n"), first)
		}
		l := probe.Load{Running: 2, Waiting: 0, KVUse: 0.2, ServerLoad: -1, At: pickT0, Source: probe.SourceScrape}
		b.State().Report(&l)
	}
	return pool, bs
}

// seatPicks returns how many of 200 picks of a 64-token stream with a
// 300-token prompt by pk went to want.
func seatPicks(t *testing.T, pk Picker, want *Backend) int {
	t.Helper()
	info := RequestInfo{Stream: true, IgnoreEOS: true, MaxTokens: 64, PromptTokens: 300}
	s := NewScratch()
	got := 0
	for range 200 {
		b, _, err := pk.Pick(context.Background(), &info, nil, s)
		if err != nil {
			t.Fatal(err)
		}
		if b == want {
			got++
		}
	}
	return got
}

// TestPickPrefersTheBackendWhoseSeatsFreeSooner: two backends with the
// same requests running and the same prefill work, one whose decodes are
// nearly done and one whose decodes have just begun. A newcomer at the
// second waits for a batch seat held for seconds (or shares the batch with
// long decodes); the default policies must send it to the first, every
// time. Without the seat time (route.load.seat_weight 0) the two look
// alike and the pick is a coin toss.
func TestPickPrefersTheBackendWhoseSeatsFreeSooner(t *testing.T) {
	if config.Default().Route.Load.SeatWeight <= 0 {
		t.Fatal("route.load.seat_weight is off by default")
	}
	for _, pol := range []string{config.PolicyProbe, config.PolicyCached} {
		t.Run(pol, func(t *testing.T) {
			mem := &Memory{}
			pool, bs := seatPool(t, mem)
			pc := testPickerConfig(pol)
			pc.D = 2
			pk := mustPicker(t, pc, pool, Deps{Memory: mem, Rand: seeded(7), Now: pickNow})
			if got := seatPicks(t, pk, bs[0]); got != 200 {
				t.Fatalf("%d of 200 picks went to the backend whose seats free sooner, want 200", got)
			}
		})
	}
}

// TestSeatTimeDecaysAsDecodesRun: the seat time a decode holds is what is
// left of its expected output at the learned speed, so it shrinks as the
// decode runs and is gone once the request ends; a request not yet past
// its first byte holds its whole expected output.
func TestSeatTimeDecaysAsDecodesRun(t *testing.T) {
	mem := &Memory{}
	_, bs := seatPool(t, mem)
	st := bs[1].State()
	// 2 x 220 tokens x 10 ms = 4.4 s; 1 s later 2.4 s; past the end 0.
	for _, c := range []struct {
		after time.Duration
		want  float64
	}{{0, 4.4e9}, {time.Second, 2.4e9}, {3 * time.Second, 0}} {
		if got := st.SeatNs(pickT0.Add(c.after)); got < c.want*0.99-1e6 || got > c.want*1.01+1e6 {
			t.Errorf("seat time %v after the first bytes: %.3g ns, want %.3g", c.after, got, c.want)
		}
	}
	at := pickT0.Add(time.Second)
	if v := st.View(at, time.Second); float64(v.Seats.LeftUs(at.UnixMicro()))*1e3 != st.SeatNs(at) {
		t.Errorf("View.Seats says %v µs left, SeatNs %v ns", v.Seats.LeftUs(at.UnixMicro()), st.SeatNs(at))
	}
	// A request not yet past its first byte holds its whole output: 100
	// tokens x 10 ms.
	w := mem.beginWork(&RequestInfo{Stream: true, IgnoreEOS: true, MaxTokens: 100, PromptTokens: 300}, bs[1], 256, 128, pickT0)
	if got := st.SeatNs(pickT0); got < 5.35e9 || got > 5.45e9 {
		t.Errorf("seat time with 100 tokens not yet started: %.3g ns, want 5.4e9", got)
	}
	mem.endWork(bs[1], &w, false)
	if got := st.SeatNs(pickT0); got < 4.35e9 || got > 4.45e9 {
		t.Errorf("seat time after the request that had not started ended: %.3g ns, want 4.4e9", got)
	}
}

// TestSeatTimeIsPricedAtTheProxyMeanBeforeTheBackendHasASpeed: a backend
// this proxy has not timed a decode at yet prices a request's seat time
// at the mean decode speed of the backends it has timed, rather than
// counting none (which would make a new backend look free of long
// decodes).
func TestSeatTimeIsPricedAtTheProxyMeanBeforeTheBackendHasASpeed(t *testing.T) {
	mem := &Memory{}
	_, bs := testPool(2)
	info := RequestInfo{Stream: true, IgnoreEOS: true, MaxTokens: 101, PromptTokens: 300}
	start := pickT0.Add(-3 * time.Second)
	w := mem.beginWork(&info, bs[0], 256, 128, start)
	if got := bs[0].State().SeatNs(start); got != 0 {
		t.Fatalf("seat time %v before any decode speed is known, want 0", got)
	}
	w.sawBytes(bs[0], []byte("data: {}\n\n"), start.Add(50*time.Millisecond))
	w.sawBytes(bs[0], []byte("data: {}\n\n"), start.Add(50*time.Millisecond+time.Second)) // 10 ms per token
	mem.endWork(bs[0], &w, true)
	if ns := bs[1].State().DecodeNs(); ns != 0 {
		t.Fatalf("backend 1 learned %v ns per token from backend 0's stream", ns)
	}
	w = mem.beginWork(&RequestInfo{Stream: true, IgnoreEOS: true, MaxTokens: 100, PromptTokens: 300}, bs[1], 256, 128, pickT0)
	if got := bs[1].State().SeatNs(pickT0); got < 0.99e9 || got > 1.01e9 {
		t.Fatalf("100 tokens at a backend with no decode speed yet: seat time %.3g ns, want 1e9 (the proxy's mean)", got)
	}
	mem.endWork(bs[1], &w, false)
}

// TestSeatTimeCountsLessWhereASeatIsFree: a backend with a batch seat free
// (fewer requests than the most its reports have shown running, none
// waiting) starts a newcomer at once, however long the decodes it runs; a
// full one makes it wait for a seat, however soon one frees. Picking 1.7 s
// after seatPool's first bytes: backend 0 is full (4 running, its most)
// with this proxy's decodes past their expected ends; backend 1 runs 3 of
// its 4 seats, this proxy's two decodes with 0.5 s left each. The seat
// time counted whole (route.load.seat_free_share 1) sends every request
// to the full backend (the default); a share of 0.5, every request to the
// free seat. A backend whose
// reports never showed more requests running than it runs now counts as
// full: before backend 1 has shown a 4th seat, its seat time counts whole;
// and so it does while its report shows requests waiting (a KV cache full
// before the seats are): with 5 seats at each backend and 5 running at
// backend 0, backend 1's 2 running and 1 waiting would win if it counted
// as having a seat free.
func TestSeatTimeCountsLessWhereASeatIsFree(t *testing.T) {
	def := config.Default().Route.Load.SeatFreeShare
	const half = 0.5
	for _, c := range []struct {
		share   float64
		limits  bool
		running [2]int // the backends' latest reports
		waiting int    // backend 1's
		want    int    // backend every pick goes to
	}{
		{half, true, [2]int{4, 3}, 0, 1},
		{def, true, [2]int{4, 3}, 0, 0},
		{half, false, [2]int{4, 3}, 0, 0},
		{half, true, [2]int{5, 2}, 1, 0},
	} {
		for _, pol := range []string{config.PolicyProbe, config.PolicyCached} {
			mem := &Memory{}
			pool, bs := seatPool(t, mem)
			at := pickT0.Add(2 * time.Millisecond) // after seatPool's reports
			if c.limits {
				for _, b := range bs { // an earlier report showing each full
					l := probe.Load{Running: c.running[0], Waiting: 2, KVUse: 0.2, ServerLoad: -1, At: at.Add(-time.Millisecond), Source: probe.SourceScrape}
					b.State().Report(&l)
				}
			}
			for i, running := range c.running {
				l := probe.Load{Running: running, Waiting: c.waiting * i, KVUse: 0.2, ServerLoad: -1, At: at, Source: probe.SourceScrape}
				if !bs[i].State().Report(&l) {
					t.Fatal("report not taken")
				}
			}
			pc := testPickerConfig(pol)
			pc.D = 2
			if pc.Load.SeatFreeShare != def {
				t.Fatalf("the picker's seat_free_share is %v, the configuration's %v", pc.Load.SeatFreeShare, def)
			}
			pc.Load.SeatFreeShare = c.share
			later := func() time.Time { return pickT0.Add(1700 * time.Millisecond) }
			pk := mustPicker(t, pc, pool, Deps{Memory: mem, Rand: seeded(7), Now: later})
			if got := seatPicks(t, pk, bs[c.want]); got != 200 {
				t.Errorf("%s, share %v, limits shown %v, running %v, waiting %d: %d of 200 picks went to backend %d, want 200", pol, c.share, c.limits, c.running, c.waiting, got, c.want)
			}
		}
	}
}
