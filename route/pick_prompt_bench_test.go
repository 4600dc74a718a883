package route

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/probe"
)

// idleProber answers no probe: the probe picker decides on the reports it
// has (all fresh here, as in BenchmarkPickers).
type idleProber struct{}

func (idleProber) Run(context.Context, []*probe.State, []*probe.State) probe.Result {
	return probe.Result{}
}

// promptPicker builds the probe picker over n backends without a Proxy
// (no scraper or other goroutine runs while it is measured), in route.load
// mode, and the request of BenchmarkPickPrompt: a 1,500-token prompt (23
// hashed blocks) whose first half a quarter of the backends were sent,
// and some token work, a learned and a pod-reported speed, a learned decode
// speed and decodes in flight on every backend; mods then change the
// picker's configuration.
func promptPicker(b testing.TB, mode string, n int, mods ...func(*PickerConfig)) (Picker, *RequestInfo, *Scratch) {
	b.Helper()
	pool, bs := testPool(n)
	mem := &Memory{}
	rc := newReqCtx()
	body := `{"model":"m","stream":true,"max_tokens":64,"ignore_eos":true,"prompt":"` + strings.Repeat("lorem ipsum ", 500) + `"}`
	rc.ex.Extract([]byte(body), 256, 64, &rc.info)
	half := rc.info
	half.NBlocks /= 2
	half.ModelHash = 0
	for i, be := range bs {
		l := probe.Load{Running: i % 7, Waiting: i % 3, KVUse: float64(i%10) / 10, ServerLoad: -1, At: pickT0, Source: probe.SourceScrape}
		for k := range 2 { // prefill counters 5 s apart: a pod-reported speed
			c := l
			c.At = pickT0.Add(time.Duration(k-2) * 5 * time.Second)
			c.PrefillSeconds, c.PrefillTokens = float64(k+1)*5, float64(k+1)*float64(50000+i%4*5000)
			be.state.Report(&c)
		}
		be.state.Report(&l)
		if i%4 == 0 {
			mem.NoteDispatch(be, &half, pickT0)
		}
		be.state.AddWork(int64(i%5)*700, int64(i%3)*64)
		for range 16 { // a learned speed
			be.state.AddWork(1000, 0)
			be.state.PrefillDone(1000, time.Duration(100+i%3*10)*time.Millisecond, 1000)
		}
		// A learned decode speed and decodes in flight (seat time).
		be.state.DecodeSample(pickT0.Add(-3*time.Second), 64, pickT0.Add(-2*time.Second))
		for k := range i % 3 {
			tok, ns := int64(64*(k+1)), be.state.DecodeNs()
			be.state.StartDecode(be.state.HoldSeat(tok, ns), tok, ns, pickT0.Add(-time.Duration(k)*100*time.Millisecond))
		}
	}
	pc := testPickerConfig(config.PolicyProbe)
	pc.Load.Tokens = mode == config.LoadTokens
	for _, m := range mods {
		m(&pc)
	}
	if v := bs[n-1].state.View(pickT0, time.Second); v.NsPerToken <= 0 || v.PodNsPerToken <= 0 || bs[n-1].state.DecodeNs() <= 0 {
		b.Fatalf("backend without every speed: learned %v, pod %v, decode %v", v.NsPerToken, v.PodNsPerToken, bs[n-1].state.DecodeNs())
	}
	if bs[1].state.SeatNs(pickT0) <= 0 {
		b.Fatalf("backend 1 holds no seat time")
	}
	pk := mustPicker(b, pc, pool, Deps{Memory: mem, Rand: seeded(1), Now: pickNow, Prober: idleProber{}})
	return pk, &rc.info, NewScratch()
}

// BenchmarkPickersPrompt is BenchmarkPickPrompt built without a Proxy, as
// BenchmarkPickers: allocs/op is the picker's own. The pick's cost must not
// grow with the pool: the prefix holder comes from Memory's index and the
// memory slot reads at most memoryScan (+ the holder) backends.
func BenchmarkPickersPrompt(b *testing.B) {
	for _, mode := range []string{config.LoadTokens, config.LoadRequests} {
		for _, n := range []int{8, 64, 512, 1024} {
			b.Run(fmt.Sprintf("policy=probe/load=%s/backends=%d", mode, n), func(b *testing.B) {
				pk, info, s := promptPicker(b, mode, n)
				benchPicks(b, pk, info, s)
			})
		}
	}
}
