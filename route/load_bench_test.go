package route

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/config"
)

// benchPromptInfo returns the RequestInfo of a 6,000-character prompt
// (1,500 tokens, 23 hashed blocks) with max_tokens and ignore_eos, and
// teaches a quarter of the backends its prefix and some token work, so
// the token-aware load and the prefix-aware memory slot do their full work.
func benchPromptInfo(p *Proxy) *reqCtx {
	rc := newReqCtx()
	body := `{"model":"m","stream":true,"max_tokens":64,"ignore_eos":true,"prompt":"` + strings.Repeat("lorem ipsum ", 500) + `"}`
	rc.ex.Extract([]byte(body), 256, 64, &rc.info)
	half := rc.info
	half.NBlocks /= 2
	half.ModelHash = 0 // the prefix only, as a dispatch would record it
	for i, b := range p.Pool().Backends() {
		if i%4 == 0 {
			p.memory.NoteDispatch(b, &half, time.Time{})
		}
		b.state.AddWork(int64(i%5)*700, int64(i%3)*64)
	}
	return rc
}

// BenchmarkPickPrompt is BenchmarkPick for a request with a prompt, in both
// route.load modes: the cost of the token-aware queue and the prefix-aware
// memory slot (a prefix match per scanned backend).
func BenchmarkPickPrompt(b *testing.B) {
	for _, mode := range []string{config.LoadTokens, config.LoadRequests} {
		for _, n := range []int{8, 64, 512, 1024} {
			b.Run(fmt.Sprintf("policy=probe/load=%s/backends=%d", mode, n), func(b *testing.B) {
				p := benchProxyLoad(b, n, mode)
				rc := benchPromptInfo(p)
				pk := p.snap.Load().picker
				ctx := context.Background()
				b.ReportAllocs()
				for b.Loop() {
					if _, _, err := pk.Pick(ctx, &rc.info, nil, &rc.pick); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func benchProxyLoad(b testing.TB, n int, mode string) *Proxy {
	p := benchProxy(b, n, "probe")
	cfg := *p.snap.Load().set.cfg
	cfg.Route.Load.Mode = mode
	if err := p.Reload(&cfg); err != nil {
		b.Fatal(err)
	}
	return p
}

func TestPickPromptDoesNotAllocate(t *testing.T) {
	for _, mode := range []string{config.LoadTokens, config.LoadRequests} {
		p := benchProxyLoad(t, 64, mode)
		rc := benchPromptInfo(p)
		pk := p.snap.Load().picker
		ctx := context.Background()
		_, _, _ = pk.Pick(ctx, &rc.info, nil, &rc.pick)
		if n := leastAllocsPerRun(200, func() { _, _, _ = pk.Pick(ctx, &rc.info, nil, &rc.pick) }); n != 0 {
			t.Fatalf("load %s: %.1f allocations per pick, want 0", mode, n)
		}
	}
}

// BenchmarkPickersPromptPodSamples is BenchmarkPickersPrompt at 64
// backends with route.load.pod_speed_samples 8: every backend's speed is
// the blend of its pod-reported and learned ones by sample count.
func BenchmarkPickersPromptPodSamples(b *testing.B) {
	for _, mode := range []string{config.LoadTokens, config.LoadRequests} {
		b.Run(fmt.Sprintf("policy=probe/load=%s/backends=64", mode), func(b *testing.B) {
			pk, info, s := promptPicker(b, mode, 64, func(pc *PickerConfig) { pc.Load.PodSamples = 8 })
			benchPicks(b, pk, info, s)
		})
	}
}
