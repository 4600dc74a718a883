package route

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/internal/vllmsim"
)

// The retry tests kill pods with vllmsim's Crash, which closes connections
// as a SIGKILLed process's kernel does (FIN): a request written later on a
// pooled keep-alive connection to it is accepted by the proxy's own kernel
// and then fails with "the server closed connection before returning the
// first response byte", the failure a restarted pod leaves behind.

// rtPolicies are the configurations the retry goals are shown for.
var rtPolicies = map[string]func(urls ...string) *config.Config{
	"least_inflight": func(urls ...string) *config.Config { return withDefaultAllow(testConfig(urls...)) },
	"probe":          func(urls ...string) *config.Config { return withDefaultAllow(ftProbeConfig(urls...)) },
}

// withDefaultAllow restores the default route.allow_paths in a test config.
func withDefaultAllow(c *config.Config) *config.Config {
	c.Route.AllowPaths = config.Default().Route.AllowPaths
	return c
}

// rtDo sends one completion request and returns nil when the client saw a
// whole, successful answer: 200 and, for a stream, [DONE] without an error
// frame.
func rtDo(tp *testProxy, stream bool, maxTokens int) error {
	resp, err := client().Post(tp.url("/v1/completions"), "application/json", strings.NewReader(ftBody(maxTokens, stream)))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	if !stream {
		_, err := io.Copy(io.Discard, resp.Body)
		return err
	}
	br := bufio.NewReader(resp.Body)
	done := false
	for {
		line, err := br.ReadString('\n')
		if strings.HasPrefix(line, `data: {"error"`) {
			return fmt.Errorf("error frame: %s", line)
		}
		if line == "data: [DONE]\n" {
			done = true
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	if !done {
		return fmt.Errorf("stream ended without [DONE]")
	}
	return nil
}

// rtWarm fills the proxy's connection pools with 16 concurrent clients, so
// every pod has several idle keep-alive connections.
func rtWarm(t *testing.T, tp *testProxy) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2; i++ {
				if err := rtDo(tp, false, 8); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("warm-up: %v", err)
	}
}

func rtRetries(t *testing.T, tp *testProxy, reason string) float64 {
	t.Helper()
	if reason == "" {
		return tp.counter(t, "probegate_retries_total", nil)
	}
	return tp.counter(t, "probegate_retries_total", map[string]string{"reason": reason})
}

// ftPoolBackend returns the proxy's backend at addr.
func ftPoolBackend(t *testing.T, tp *testProxy, addr string) *Backend {
	t.Helper()
	for _, b := range tp.Pool().Backends() {
		if b.addr == addr {
			return b
		}
	}
	t.Fatalf("no backend %s in the pool", addr)
	return nil
}

// rtKills are the two ways a pod's connections die with it: FIN (the
// kernel closing the sockets of a SIGKILLed process that had nothing
// unread) and RST (sockets with unread data, or a node that vanished).
var rtKills = map[string]func(*vllmsim.Server) error{
	"fin": (*vllmsim.Server).Crash,
	"rst": (*vllmsim.Server).Close,
}

// (a) Warm pools, one pod SIGKILLed, 300 ms of quiet, then 100 sequential
// requests: none fails, for least_inflight and probe, streaming or not.
func TestRetryWarmPoolKillCostsNoClientError(t *testing.T) {
	for name, mk := range rtPolicies {
		for kill, killf := range rtKills {
			for _, stream := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/stream=%t", name, kill, stream), func(t *testing.T) {
					fleet := ftFleet(t, 2)
					cfg := mk(fleet.URLs()...)
					tp := startProxy(t, cfg)
					rtWarm(t, tp)
					if err := killf(fleet.Servers()[0]); err != nil {
						t.Fatal(err)
					}
					time.Sleep(300 * time.Millisecond)
					for i := 0; i < 100; i++ {
						if err := rtDo(tp, stream, 2); err != nil {
							t.Fatalf("request %d after the kill: %v", i, err)
						}
					}
					resets, connects := rtRetries(t, tp, "reset"), rtRetries(t, tp, "connect")
					t.Logf("retries: reset %v, connect %v, breaker %v", resets, connects, rtRetries(t, tp, "breaker"))
					if name == "least_inflight" && resets+connects == 0 {
						// least_inflight cannot see the kill: its first pick
						// of the dead pod must have been re-picked.
						t.Fatal("no retry: the test did not exercise the dead pod")
					}
					if name == "least_inflight" && kill == "rst" && resets == 0 {
						// A reset pooled connection fails the write.
						t.Fatal("no retry on reset: the test did not exercise a stale connection")
					}
				})
			}
		}
	}
}

// A pod that restarts (crash, OOM kill, rollout) leaves stale pooled
// connections: for every policy, streaming or not, they cost no client
// error and do not open the restarted pod's breaker.
func TestRetryStaleConnectionsAfterRestartEveryPolicy(t *testing.T) {
	for _, policy := range []string{"round_robin", "random", "least_inflight", "cached", "probe"} {
		for _, stream := range []bool{false, true} {
			kill := "fin"
			if stream {
				kill = "rst" // both kinds of death, without doubling the run time
			}
			t.Run(fmt.Sprintf("%s/%s/stream=%t", policy, kill, stream), func(t *testing.T) {
				fleet := ftFleet(t, 2)
				cfg := ftProbeConfig(fleet.URLs()...)
				cfg.Route.Policy = policy
				cfg.Breaker.OpenFor = config.Duration(10 * time.Second) // an opened breaker would stay open
				tp := startProxy(t, cfg)
				victim := fleet.Servers()[0]
				rtWarm(t, tp)
				if err := rtKills[kill](victim); err != nil {
					t.Fatal(err)
				}
				if err := victim.Restart(); err != nil {
					t.Fatal(err)
				}
				if policy == "cached" || policy == "probe" {
					// These pick by the pods' reports, and score a pod
					// whose report went stale (unknown KV use) below a
					// known idle one: while the sequential requests tie
					// on queue, the restarted pod would get none until
					// the proxy holds a report of it. Its scrapes can
					// fail for longer than scrape.stale_after on a
					// starved machine (the kill, the restart, 100 ms
					// scrape timeouts), so wait for that report.
					restarted := time.Now()
					vb := ftPoolBackend(t, tp, victim.Addr())
					waitUntil(t, 10*time.Second, func() bool {
						l := vb.state.Latest()
						return l != nil && l.At.After(restarted)
					}, "a report of the restarted pod")
				}
				before := ftServed(t, tp, victim.Addr())
				for i := 0; i < 40; i++ {
					if err := rtDo(tp, stream, 2); err != nil {
						t.Fatalf("request %d after the restart: %v", i, err)
					}
				}
				if st := ftBackend(tp, victim.Addr()).Breaker; st != "closed" {
					t.Errorf("the restarted pod's breaker is %q: stale connections opened it", st)
				}
				if ftServed(t, tp, victim.Addr()) == before {
					t.Errorf("the restarted pod served none of 40 requests")
				}
				t.Logf("retries: reset %v, connect %v", rtRetries(t, tp, "reset"), rtRetries(t, tp, "connect"))
			})
		}
	}
}

// (b) A pod SIGKILLed while 10 non-streaming requests wait for its first
// byte: all 10 are answered 200 by the other pod, each retried once.
// (d) With upstream.retry_on_reset: false, the same 10 get today's 502.
func TestRetryKillWhileWaitingForFirstByte(t *testing.T) {
	for name, mk := range rtPolicies {
		for _, onReset := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/retry_on_reset=%t", name, onReset), func(t *testing.T) {
				rtKillWhileWaiting(t, mk, onReset)
			})
		}
	}
}

func rtKillWhileWaiting(t *testing.T, mk func(...string) *config.Config, onReset bool) {
	fleet := ftFleet(t, 2)
	victim, other := fleet.Servers()[0], fleet.Servers()[1]
	// Hold every request on the victim until the kill: its engine accepts
	// them and never answers.
	victim.SetFaults(vllmsim.Faults{Hang: true})
	cfg := mk(victim.URL())
	cfg.Upstream.RetryOnReset = onReset
	cfg.Log.Access = true
	var logs syncBuffer
	tp := startProxy(t, cfg, func(o *Options) { o.Logger = zerolog.New(&logs) })
	const n = 10
	type result struct {
		status int
		body   string
		err    error
	}
	results := make(chan result, n)
	for i := 0; i < n; i++ {
		go func() {
			resp, err := client().Post(tp.url("/v1/completions"), "application/json", strings.NewReader(ftBody(4, false)))
			if err != nil {
				results <- result{err: err}
				return
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			results <- result{resp.StatusCode, string(b), err}
		}()
	}
	ftPoll(t, 3*time.Second, "10 requests wait on the victim", func() bool {
		return victim.State().ServerLoad == n // received whole by the pod
	})
	// A second pod joins; then the first dies.
	cfg2 := mk(victim.URL(), other.URL())
	cfg2.Upstream.RetryOnReset = onReset
	if err := tp.Reload(cfg2); err != nil {
		t.Fatal(err)
	}
	if err := victim.Crash(); err != nil {
		t.Fatal(err)
	}
	want := 200
	if !onReset {
		want = http.StatusBadGateway
	}
	for i := 0; i < n; i++ {
		select {
		case r := <-results:
			if r.err != nil || r.status != want {
				t.Errorf("client %d: status %d (%v) %s, want %d", i, r.status, r.err, r.body, want)
			}
			if want != 200 && !strings.Contains(r.body, `"code":502`) {
				t.Errorf("client %d: 502 without the error envelope: %s", i, r.body)
			}
			if want == 200 && !strings.Contains(r.body, `-r1"`) {
				// The simulator names its answer after X-Request-Id.
				t.Errorf("client %d: the retry did not carry the suffixed X-Request-Id: %s", i, r.body)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a client hung")
		}
	}
	wantRetries, wantOther := float64(n), float64(n)
	if !onReset {
		wantRetries, wantOther = 0, 0
	}
	if got := rtRetries(t, tp, "reset"); got != wantRetries {
		t.Errorf("retries_total{reason=reset} = %v, want %v (each request once)", got, wantRetries)
	}
	if got := ftServed(t, tp, other.Addr()); got != wantOther {
		t.Errorf("the other pod answered %v, want %v", got, wantOther)
	}
	// The access log line says how many attempts each request took.
	wantAttempts := `"attempts":2`
	if !onReset {
		wantAttempts = `"attempts":1`
	}
	if got := logs.count(wantAttempts); got != n {
		t.Errorf("%d access log lines with %s, want %d", got, wantAttempts, n)
	}
}

// (c) A pod killed after it sent the first SSE frame: the client gets the
// SSE error frame and nothing is retried.
func TestRetryNeverAfterTheFirstByte(t *testing.T) {
	for name, mk := range rtPolicies {
		t.Run(name, func(t *testing.T) {
			fleet := ftFleet(t, 2)
			tp := startProxy(t, mk(fleet.URLs()...))
			stream := ftOpenStream(t, tp.url("/v1/completions"), ftBody(2000, true))
			var victim *vllmsim.Server
			for _, s := range fleet.Servers() {
				if ftBackend(tp, s.Addr()).Inflight > 0 {
					victim = s
				}
			}
			if victim == nil {
				t.Fatal("the stream is on no pod")
			}
			if err := victim.Crash(); err != nil {
				t.Fatal(err)
			}
			select {
			case r := <-stream:
				if r.done || !r.errFrame {
					t.Fatalf("stream after the kill: %+v, want an error frame and no [DONE]", r)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the cut stream hung")
			}
			if got := rtRetries(t, tp, ""); got != 0 {
				t.Fatalf("retries_total = %v after a stream was under way, want 0", got)
			}
		})
	}
}

// With a single pod, a stale pooled connection has no other backend to go
// to: the request is retried on the same pod over a fresh connection.
func TestRetryStaleConnectionSinglePod(t *testing.T) {
	fleet := ftFleet(t, 1)
	pod := fleet.Servers()[0]
	tp := startProxy(t, withDefaultAllow(testConfig(pod.URL())))
	rtWarm(t, tp)
	if err := pod.Close(); err != nil { // RST: the pooled sockets fail the write
		t.Fatal(err)
	}
	if err := pod.Restart(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if err := rtDo(tp, i%2 == 0, 2); err != nil {
			t.Fatalf("request %d after the restart: %v", i, err)
		}
	}
	if got := rtRetries(t, tp, "reset"); got < 1 {
		t.Fatalf("retries_total{reason=reset} = %v: no stale connection was met", got)
	}
	if st := ftBackend(tp, pod.Addr()).Breaker; st != "closed" {
		t.Fatalf("breaker %q after a restart", st)
	}
}

// A breaker refusal (a half-open breaker whose trial slot is taken) sends
// nothing and costs no time: the request is re-picked without spending
// upstream.retries, so even with retries: 0 it reaches a healthy pod.
func TestBreakerRefusalDoesNotSpendRetries(t *testing.T) {
	var hits atomic.Int64
	release := make(chan struct{})
	half := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if isCanary(r) {
			w.WriteHeader(500) // the pod is sick: the 500 counts
			return
		}
		if hits.Add(1) == 1 {
			w.WriteHeader(500) // opens the breaker (consecutive_failures 1)
			return
		}
		select { // the half-open trial: held until the test ends
		case <-release:
		case <-r.Context().Done():
		}
	})
	good := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(200)
	})
	cfg := testConfig(half.URL, good.URL)
	cfg.Route.Policy = "round_robin"
	cfg.Upstream.Retries = 0
	cfg.Breaker.ConsecutiveFailures = 1
	cfg.Breaker.OpenFor = config.Duration(100 * time.Millisecond)
	cfg.Breaker.HalfOpenRequests = 1
	// The trial is held until the test ends: first_byte_timeout must not
	// end it first (at testConfig's 2 s, a loaded run's trial timed out,
	// the breaker opened and half-opened again, and a later request became
	// the next held trial: 504).
	cfg.Upstream.FirstByteTimeout = config.Duration(time.Minute)
	tp := startProxy(t, cfg)
	t.Cleanup(func() { close(release) }) // before the proxy shuts down
	send := func() int {
		resp := post(t, tp.url("/v1/completions"), `{}`)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for hits.Load() < 1 {
		send()
	}
	time.Sleep(150 * time.Millisecond) // open_for passes: half-open
	for i := 0; hits.Load() < 2; i++ {
		if i > 20 {
			t.Fatal("no request became the half-open trial")
		}
		go func() {
			resp, err := client().Post(tp.url("/v1/completions"), "application/json", strings.NewReader(`{}`))
			if err == nil {
				resp.Body.Close()
			}
		}()
		time.Sleep(20 * time.Millisecond)
	}
	for i := 0; i < 6; i++ {
		if code := send(); code != 200 {
			t.Fatalf("request %d: status %d while a half-open trial holds the slot, want 200 from the other pod", i, code)
		}
	}
	if got := rtRetries(t, tp, "breaker"); got < 1 {
		t.Fatalf("retries_total{reason=breaker} = %v: round robin never met the half-open pod", got)
	}
}
