package route

import (
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
)

// poolingPod stands for a vLLM pod serving a pooling endpoint: every path
// reaches the simulated pod, but for POST /v1/embeddings, which the pod
// answers as vLLM answers it whatever "stream" says: whole, its head only
// once the work is done. The work is a non-stream completion of the
// request's body on the simulated pod, so its token counters advance
// meanwhile, as vLLM's prompt-token counter does while it embeds.
func poolingPod(t *testing.T, sim string) string {
	t.Helper()
	target, err := url.Parse(sim)
	if err != nil {
		t.Fatal(err)
	}
	rest := httputil.NewSingleHostReverseProxy(target)
	return upstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/embeddings" {
			rest.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		// The pod reads no "stream" field here: the work is done whole.
		work := strings.Replace(string(body), `"stream":true`, `"stream":false`, 1)
		req, err := http.NewRequestWithContext(r.Context(), "POST", sim+"/v1/completions", strings.NewReader(work))
		if err != nil {
			t.Error(err)
			return
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return // the proxy gave up on the request
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(resp.StatusCode)
		_, _ = io.WriteString(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5]}]}`)
	}).URL
}

// "stream": true in the body of a request to an endpoint that never
// streams (vLLM's embeddings, pooling, scoring and tokenizing endpoints
// read no such field) does not make the proxy judge the answer a stream.
// A stream's head comes before the generation, so its first-byte timeout
// always counts against the backend; this answer's head comes after the
// whole work, whose size the client chooses. Judged a stream, a client
// sending breaker.consecutive_failures long such requests opened a
// working pod's breaker for everyone; judged as the non-stream answer it
// is, the pod's advancing token counters excuse the timeouts.
func TestStreamFlagOnAPoolingEndpointCannotOpenAProgressingBackendsBreaker(t *testing.T) {
	long := ftBody(100000, true) // ftBody's "stream":true, on /v1/embeddings
	if !strings.Contains(long, `"stream":true`) {
		t.Fatalf("body %s asks for no stream", long)
	}
	longGenerationBursts(t, func(t *testing.T) progressRig {
		fleet := ftFleet(t, 1)
		cfg := withDefaultAllow(progressConfig(poolingPod(t, fleet.URLs()[0])))
		tp := startProxy(t, cfg)
		return progressRig{tp: tp, url: tp.url("/v1/embeddings"), threshold: cfg.Breaker.ConsecutiveFailures, wait: cfg.Upstream.FirstByteTimeout.D()}
	}, long)
}
