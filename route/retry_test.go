package route

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

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
	"least_inflight": testConfig,
	"probe":          ftProbeConfig,
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

// (a) Warm pools, one pod SIGKILLed, 300 ms of quiet, then 100 sequential
// requests: none fails, for least_inflight and probe, streaming or not.
func TestRetryWarmPoolKillCostsNoClientError(t *testing.T) {
	for name, mk := range rtPolicies {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%t", name, stream), func(t *testing.T) {
				fleet := ftFleet(t, 2)
				cfg := mk(fleet.URLs()...)
				tp := startProxy(t, cfg)
				rtWarm(t, tp)
				if err := fleet.Servers()[0].Crash(); err != nil {
					t.Fatal(err)
				}
				time.Sleep(300 * time.Millisecond)
				for i := 0; i < 100; i++ {
					if err := rtDo(tp, stream, 2); err != nil {
						t.Fatalf("request %d after the kill: %v", i, err)
					}
				}
				resets := rtRetries(t, tp, "reset")
				t.Logf("retries: reset %v, connect %v, breaker %v", resets, rtRetries(t, tp, "connect"), rtRetries(t, tp, "breaker"))
				if name == "least_inflight" && resets == 0 {
					// least_inflight cannot see the kill: its first pick of the
					// dead pod must have met a stale connection.
					t.Fatal("no retry on reset: the test did not exercise a stale connection")
				}
			})
		}
	}
}

// A pod that restarts (crash, OOM kill, rollout) leaves stale pooled
// connections: for every policy, streaming or not, they cost no client
// error and do not open the restarted pod's breaker.
func TestRetryStaleConnectionsAfterRestartEveryPolicy(t *testing.T) {
	for _, policy := range []string{"round_robin", "random", "least_inflight", "cached", "probe"} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%t", policy, stream), func(t *testing.T) {
				fleet := ftFleet(t, 2)
				cfg := ftProbeConfig(fleet.URLs()...)
				cfg.Route.Policy = policy
				cfg.Breaker.OpenFor = config.Duration(10 * time.Second) // an opened breaker would stay open
				tp := startProxy(t, cfg)
				victim := fleet.Servers()[0]
				rtWarm(t, tp)
				if err := victim.Crash(); err != nil {
					t.Fatal(err)
				}
				if err := victim.Restart(); err != nil {
					t.Fatal(err)
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
func TestRetryKillWhileWaitingForFirstByte(t *testing.T) {
	for name, mk := range rtPolicies {
		t.Run(name, func(t *testing.T) {
			fleet := ftFleet(t, 2)
			victim, other := fleet.Servers()[0], fleet.Servers()[1]
			// Hold every request on the victim until the kill: its engine
			// accepts them and never answers.
			victim.SetFaults(vllmsim.Faults{Hang: true})
			tp := startProxy(t, mk(victim.URL()))
			const n = 10
			results := make(chan error, n)
			for i := 0; i < n; i++ {
				go func() { results <- rtDo(tp, false, 4) }()
			}
			ftPoll(t, 3*time.Second, "10 requests wait on the victim", func() bool {
				return ftBackend(tp, victim.Addr()).Inflight == n
			})
			// A second pod joins; then the first dies.
			if err := tp.Reload(mk(victim.URL(), other.URL())); err != nil {
				t.Fatal(err)
			}
			if err := victim.Crash(); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < n; i++ {
				select {
				case err := <-results:
					if err != nil {
						t.Errorf("client %d: %v", i, err)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("a client hung")
				}
			}
			if got := rtRetries(t, tp, "reset"); got != n {
				t.Errorf("retries_total{reason=reset} = %v, want %d (each request once)", got, n)
			}
			if got := ftServed(t, tp, other.Addr()); got != n {
				t.Errorf("the other pod answered %v, want %d", got, n)
			}
		})
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

// (d) upstream.retry_on_reset: false restores the old behaviour: a request
// written on a stale connection is answered 502.
func TestRetryOnResetFalseGives502(t *testing.T) {
	fleet := ftFleet(t, 2)
	cfg := testConfig(fleet.URLs()...)
	cfg.Upstream.RetryOnReset = false
	tp := startProxy(t, cfg)
	rtWarm(t, tp)
	if err := fleet.Servers()[0].Crash(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	bad := 0
	for i := 0; i < 20; i++ {
		resp := post(t, tp.url("/v1/completions"), ftBody(2, false))
		if resp.StatusCode == http.StatusBadGateway {
			msg := envelope(t, resp, http.StatusBadGateway)
			if !strings.Contains(msg, "before the first response byte") {
				t.Errorf("502 message %q", msg)
			}
			bad++
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if bad == 0 {
		t.Fatal("no 502 with retry_on_reset: false")
	}
	if got := rtRetries(t, tp, "reset"); got != 0 {
		t.Fatalf("retries_total{reason=reset} = %v with retry_on_reset: false", got)
	}
}
