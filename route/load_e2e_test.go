package route

import (
	"sync"
	"testing"

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
	for _, b := range tp.Proxy.Pool().Backends() {
		pre, dec, _ := b.state.Work()
		if v := b.state.View(tp.Proxy.now(), 0); pre != 0 || dec != 0 || v.PrefillRequests != 0 {
			t.Fatalf("%s: pending prefill %v tokens in %d requests, decode %v after every request ended", b.addr, pre, v.PrefillRequests, dec)
		}
	}
}
