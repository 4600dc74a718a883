package route

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/vllmsim"
)

// A client whose prompts are so long that their prefill alone outlasts
// upstream.first_byte_timeout never opens a working pod's breaker, even
// when each prefill runs alone. vLLM counts a prompt's tokens
// (vllm:prompt_tokens_total) only at its first token, and an engine step
// that produces no token records no iteration stats, so during a solo
// chunked prefill no token counter moves: the only /metrics sign of the
// engine stepping is vllm:kv_cache_usage_perc, which grows as each chunk
// gets its KV blocks. The simulated pod does the same (counters at the
// first token, blocks per chunk). Without the KV gauge as a sign of
// progress, breaker.consecutive_failures such requests in a row opened the
// breaker, and every other client got 503.
func TestSoloPrefillsNeverOpenAProgressingBackendsBreaker(t *testing.T) {
	for _, policy := range []string{"cached", "least_inflight"} {
		t.Run(policy, func(t *testing.T) {
			fleet := simFleet(t, 1, func(c *vllmsim.Config) {
				c.TimeScale = 0.1
				// A 16k-token prompt prefills in 16 chunks of 1,024
				// tokens, 61 ms each at this scale: about 1 s, against a
				// first_byte_timeout of 400 ms.
				c.MaxNumBatchedTokens = 1024
				c.PrefillPerToken = 600 * time.Microsecond
			})
			cfg := progressConfig(fleet.URLs()[0])
			cfg.Route.Policy = policy
			tp := startProxy(t, cfg)
			url := tp.url("/v1/completions")
			if code := postStatus(t, url, ftBody(4, false)); code != 200 {
				t.Fatalf("warm-up: %d", code)
			}
			n := cfg.Breaker.ConsecutiveFailures + 1
			for i := range n {
				// A distinct prompt each time: no prefix-cache hit.
				prompt := fmt.Sprintf("%08d", i) + strings.Repeat("x", 16<<10*vllmsim.BytesPerToken-8)
				body := fmt.Sprintf(`{"model":%q,"prompt":%q,"max_tokens":1}`, ftModel, prompt)
				if code := postStatus(t, url, body); code != 504 {
					t.Fatalf("request %d: %d, want 504 (prefill longer than first_byte_timeout)", i, code)
				}
				if st := tp.DebugBackends()[0].Breaker; st != "closed" {
					t.Fatalf("breaker %s after %d solo prefills timed out on a working pod (excused{progress} %v)",
						st, i+1, tp.counter(t, "probegate_breaker_excused_total", map[string]string{"reason": "progress"}))
				}
			}
			if code := postStatus(t, url, ftBody(1, false)); code != 200 {
				t.Fatalf("a short request after the long prompts: %d, want 200", code)
			}
		})
	}
}
