package route

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/vllmsim"
)

// Every request's token work is taken back when it ends, whatever the
// response path (streamed, buffered non-streaming): after a burst of both
// kinds, every backend's pending prefill and decode are zero. A leak would
// make a backend look busier with every request it served.
func TestTokenWorkSettlesToZero(t *testing.T) {
	f := simFleet(t, 3, func(c *vllmsim.Config) { c.MaxNumSeqs = 4 })
	tp := startProxy(t, probeConfig(f))
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 4; i++ {
				complete(t, tp.url("/v1/completions"), vllmsim.DefaultConfig().Model, 8, (w+i)%2 == 0)
			}
		}()
	}
	wg.Wait()
	// A hijacked stream settles right after its last write (so that
	// Shutdown waits for that write): its client can read the end a
	// moment before. A leak never settles.
	settled := func() bool {
		for _, b := range tp.Proxy.Pool().Backends() {
			pre, dec, _ := b.state.Work()
			if v := b.state.View(tp.Proxy.now(), 0); pre != 0 || dec != 0 || v.PrefillRequests != 0 {
				return false
			}
		}
		return true
	}
	for end := time.Now().Add(time.Second); !settled() && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	for _, b := range tp.Proxy.Pool().Backends() {
		pre, dec, _ := b.state.Work()
		if v := b.state.View(tp.Proxy.now(), 0); pre != 0 || dec != 0 || v.PrefillRequests != 0 {
			t.Fatalf("%s: pending prefill %v tokens in %d requests, decode %v a second after every request ended", b.addr, pre, v.PrefillRequests, dec)
		}
	}
}

// A request with a prompt no backend has seen counts its whole prompt as
// prefill work at the backend it is sent to: 1,000 tokens of unique text
// (4,000 characters) to a pod that accepts it and never answers show
// 1,000 pending prefill tokens there. The proxy also notes that the pod now
// holds the prompt's blocks; noted before the work was counted, the prompt
// matched its own blocks and counted only what lay past them (424 of the
// 1,000 tokens here), in every request through the proxy: tokens mode saw
// a fraction of the queued prefill and learned speeds from a fraction of
// the work.
func TestTokenWorkCountsAFreshPromptWhole(t *testing.T) {
	f := simFleet(t, 1, nil)
	f.Servers()[0].SetFaults(vllmsim.Faults{Hang: true})
	tp := startProxy(t, probeConfig(f))
	b := tp.Proxy.Pool().Backends()[0]
	prompt := strings.Repeat("unique words, never sent before. ", 4000/33+1)[:4000]
	body := fmt.Sprintf(`{"model":%q,"prompt":%q,"max_tokens":8,"ignore_eos":true,"stream":true}`, vllmsim.DefaultConfig().Model, prompt)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, tp.url("/v1/completions"), strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if resp, err := client().Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	defer func() { cancel(); <-done }()
	var pre float64
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if pre, _, _ = b.state.Work(); pre > 0 {
			break
		}
	}
	if pre != 1000 {
		t.Fatalf("pending prefill %v tokens for a fresh 1,000-token prompt, want 1000", pre)
	}
}
