package vllmsim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(fleetChildEnv) != "" {
		os.Exit(runFleetChild())
	}
	goleak.VerifyTestMain(m)
}

func startServer(t *testing.T, mod func(*Config)) *Server {
	t.Helper()
	cfg := DefaultConfig()
	cfg.TimeScale = 0.05
	cfg.LoRAs = []string{"sql-lora", "chat-lora"}
	if mod != nil {
		mod(&cfg)
	}
	s := NewServer(cfg)
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newClient(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

func post(t *testing.T, c *http.Client, url, body string, hdr ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// readSSE returns the data payloads of an SSE body, checking the framing.
func readSSE(t *testing.T, r io.Reader) []string {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(b, []byte("data: [DONE]\n\n")) {
		t.Fatalf("stream does not end with [DONE]: %q", b[max(0, len(b)-80):])
	}
	var out []string
	for _, f := range strings.Split(strings.TrimSuffix(string(b), "\n\n"), "\n\n") {
		if !strings.HasPrefix(f, "data: ") || strings.Contains(f, "\n") {
			t.Fatalf("bad frame %q", f)
		}
		out = append(out, strings.TrimPrefix(f, "data: "))
	}
	return out
}

type chunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Choices []struct {
		Index int    `json:"index"`
		Text  string `json:"text"`
		Delta struct {
			Role    *string `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usageJSON `json:"usage"`
}

func TestStreamingSSE(t *testing.T) {
	s := startServer(t, nil)
	c := newClient(t)
	cases := []struct {
		name, path, body string
		chat             bool
	}{
		{"completions", "/v1/completions", `{"model":"meta-llama/Llama-3.1-8B-Instruct","prompt":"Once upon a time","max_tokens":12,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`, false},
		{"chat", "/v1/chat/completions", `{"model":"sql-lora","messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi "},{"type":"text","text":"there"}]}],"max_tokens":12,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := post(t, c, s.URL()+tc.path, tc.body, "X-Request-Id", "req-"+tc.name)
			defer resp.Body.Close()
			if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("status %d content-type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			if got := resp.Header.Get("X-Request-Id"); got != "req-"+tc.name {
				t.Errorf("X-Request-Id echoed %q", got)
			}
			frames := readSSE(t, resp.Body)
			if frames[len(frames)-1] != "[DONE]" {
				t.Fatal("last frame is not [DONE]")
			}
			var chunks []chunk
			for _, f := range frames[:len(frames)-1] {
				var ch chunk
				if err := json.Unmarshal([]byte(f), &ch); err != nil {
					t.Fatalf("frame %q: %v", f, err)
				}
				if !strings.HasSuffix(ch.ID, "req-"+tc.name) {
					t.Errorf("id %q does not carry the request id", ch.ID)
				}
				chunks = append(chunks, ch)
			}
			tokens := 0
			if tc.chat {
				if r := chunks[0].Choices[0].Delta.Role; r == nil || *r != "assistant" {
					t.Error("first chat chunk lacks delta.role")
				}
				chunks = chunks[1:]
			}
			usage := chunks[len(chunks)-1]
			if usage.Usage == nil || len(usage.Choices) != 0 || usage.Usage.CompletionTokens != 12 ||
				usage.Usage.PromptTokens == 0 || usage.Usage.TotalTokens != usage.Usage.PromptTokens+12 {
				t.Errorf("usage frame = %+v", usage)
			}
			chunks = chunks[:len(chunks)-1]
			for i, ch := range chunks {
				if len(ch.Choices) != 1 {
					t.Fatalf("chunk %d has %d choices", i, len(ch.Choices))
				}
				fr := ch.Choices[0].FinishReason
				if (fr != nil) != (i == len(chunks)-1) {
					t.Errorf("chunk %d finish_reason %v", i, fr)
				}
				tokens++
			}
			if tokens != 12 || *chunks[len(chunks)-1].Choices[0].FinishReason != "length" {
				t.Errorf("%d token frames, want 12 ending with length", tokens)
			}
		})
	}
}

func TestNonStreamingUsageAndORCA(t *testing.T) {
	s := startServer(t, nil)
	c := newClient(t)
	for _, format := range []string{"TEXT", "JSON", ""} {
		t.Run("orca="+format, func(t *testing.T) {
			resp := post(t, c, s.URL()+"/v1/chat/completions",
				`{"model":"meta-llama/Llama-3.1-8B-Instruct","messages":[{"role":"user","content":"hello"}],"max_tokens":7,"ignore_eos":true}`,
				"endpoint-load-metrics-format", format)
			defer resp.Body.Close()
			var body struct {
				Object  string `json:"object"`
				Choices []struct {
					Message      chatMessageOut `json:"message"`
					FinishReason string         `json:"finish_reason"`
				} `json:"choices"`
				Usage usageJSON `json:"usage"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if body.Object != "chat.completion" || body.Usage.CompletionTokens != 7 || body.Usage.PromptTokens == 0 ||
				body.Choices[0].FinishReason != "length" || body.Choices[0].Message.Content == "" {
				t.Errorf("response %+v", body)
			}
			h := resp.Header.Get("endpoint-load-metrics")
			switch format {
			case "TEXT":
				rest, ok := strings.CutPrefix(h, "TEXT ")
				if !ok {
					t.Fatalf("header %q", h)
				}
				got := map[string]float64{}
				for _, kv := range strings.Split(rest, ", ") {
					k, v, _ := strings.Cut(kv, "=")
					f, err := strconv.ParseFloat(v, 64)
					if err != nil {
						t.Fatalf("pair %q: %v", kv, err)
					}
					got[k] = f
				}
				for _, k := range []string{"named_metrics.kv_cache_usage_perc", "named_metrics.num_requests_waiting", "named_metrics.num_requests_running"} {
					if _, ok := got[k]; !ok {
						t.Errorf("missing %s in %q", k, h)
					}
				}
			case "JSON":
				rest, ok := strings.CutPrefix(h, "JSON ")
				var v struct {
					Named map[string]float64 `json:"named_metrics"`
				}
				if !ok || json.Unmarshal([]byte(rest), &v) != nil || len(v.Named) != 3 {
					t.Errorf("header %q", h)
				}
			default:
				if h != "" {
					t.Errorf("ORCA header %q without asking", h)
				}
			}
		})
	}
}

func TestPromptShapes(t *testing.T) {
	s := startServer(t, nil)
	c := newClient(t)
	cases := []struct {
		name, prompt string
		choices      int
		promptTokens int
	}{
		{"string", `"abcdefgh"`, 1, 2},
		{"strings", `["abcd","abcdefgh","x"]`, 3, 4},
		{"token ids", `[1,2,3,4,5]`, 1, 5},
		{"token id lists", `[[1,2],[3,4,5]]`, 2, 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := post(t, c, s.URL()+"/v1/completions", `{"model":"chat-lora","max_tokens":3,"ignore_eos":true,"prompt":`+tc.prompt+`}`)
			defer resp.Body.Close()
			var body struct {
				Choices []completionChoice `json:"choices"`
				Usage   usageJSON          `json:"usage"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != 200 {
				t.Fatalf("status %d err %v", resp.StatusCode, err)
			}
			if len(body.Choices) != tc.choices || body.Usage.PromptTokens != tc.promptTokens ||
				body.Usage.CompletionTokens != 3*tc.choices {
				t.Errorf("choices %d usage %+v, want %d choices, %d prompt tokens", len(body.Choices), body.Usage, tc.choices, tc.promptTokens)
			}
			for i, ch := range body.Choices {
				if ch.Index != i || ch.Text != " the quick brown" {
					t.Errorf("choice %d = %+v", i, ch)
				}
			}
		})
	}
}

func TestErrors(t *testing.T) {
	s := startServer(t, nil)
	c := newClient(t)
	cases := []struct {
		name, method, path, body string
		status                   int
		typ                      string
	}{
		{"malformed json", "POST", "/v1/completions", `{"model":`, 400, "BadRequestError"},
		{"no prompt", "POST", "/v1/completions", `{"model":"meta-llama/Llama-3.1-8B-Instruct"}`, 400, "BadRequestError"},
		{"too long", "POST", "/v1/completions", `{"model":"meta-llama/Llama-3.1-8B-Instruct","prompt":"x","max_tokens":100000000}`, 400, "BadRequestError"},
		{"unknown model", "POST", "/v1/chat/completions", `{"model":"gpt-4","messages":[{"role":"user","content":"x"}]}`, 404, "NotFoundError"},
		{"unknown path", "GET", "/v2/nothing", ``, 404, "NotFoundError"},
		{"wrong method", "GET", "/v1/completions", ``, 405, "MethodNotAllowedError"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, s.URL()+tc.path, strings.NewReader(tc.body))
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var env struct {
				Error struct {
					Message string `json:"message"`
					Type    string `json:"type"`
					Param   any    `json:"param"`
					Code    int    `json:"code"`
				} `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status || env.Error.Code != tc.status || env.Error.Type != tc.typ || env.Error.Message == "" {
				t.Errorf("status %d envelope %+v, want %d %s", resp.StatusCode, env.Error, tc.status, tc.typ)
			}
		})
	}
}

func TestMetricsParse(t *testing.T) {
	s := startServer(t, func(c *Config) { c.MaxLoRAs = 1 })
	c := newClient(t)
	// Two adapters, one slot: the second waits while the first runs.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for _, m := range []string{"sql-lora", "chat-lora"} {
		go func() {
			req, _ := http.NewRequestWithContext(ctx, "POST", s.URL()+"/v1/completions",
				strings.NewReader(`{"model":"`+m+`","prompt":"hello","max_tokens":2000,"ignore_eos":true}`))
			if resp, err := c.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	waitFor(t, func() bool { st := s.State(); return st.Running == 1 && st.Waiting == 1 })

	resp, err := c.Get(s.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if n := len(body); n < 20<<10 || n > 40<<10 {
		t.Errorf("scrape is %d bytes, want 20-40 KB", n)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("expfmt: %v", err)
	}
	gauge := func(name string) float64 {
		f, ok := fams[name]
		if !ok || len(f.Metric) == 0 {
			t.Fatalf("family %s missing", name)
		}
		m := f.Metric[0]
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		if name != "vllm:lora_requests_info" && (labels["engine"] != "0" || labels["model_name"] != "meta-llama/Llama-3.1-8B-Instruct") {
			t.Errorf("%s labels %v", name, labels)
		}
		if m.Gauge != nil {
			return m.Gauge.GetValue()
		}
		return m.Counter.GetValue()
	}
	if gauge("vllm:num_requests_running") != 1 || gauge("vllm:num_requests_waiting") != 1 {
		t.Error("running/waiting gauges do not match the true state 1/1")
	}
	if kv := gauge("vllm:kv_cache_usage_perc"); kv <= 0 || kv > 1 {
		t.Errorf("kv usage %v", kv)
	}
	if gauge("vllm:prefix_cache_queries_total") < 2 {
		t.Error("prefix queries not counted")
	}
	gauge("vllm:prefix_cache_hits_total")
	for _, name := range []string{"vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds"} {
		if f := fams[name]; f == nil || f.Metric[0].Histogram == nil || len(f.Metric[0].Histogram.Bucket) < 15 {
			t.Errorf("histogram %s missing", name)
		}
	}
	cc := fams["vllm:cache_config_info"].Metric[0]
	found := 0
	for _, l := range cc.Label {
		if (l.GetName() == "block_size" && l.GetValue() == "16") || (l.GetName() == "num_gpu_blocks" && l.GetValue() == "8192") {
			found++
		}
	}
	if found != 2 {
		t.Error("cache_config_info lacks block_size/num_gpu_blocks")
	}
	if fams["vllm:request_success_total"] == nil || fams["python_gc_objects_collected_total"] == nil || fams["process_start_time_seconds"] == nil {
		t.Error("request_success_total or filler missing")
	}

	// lora_requests_info: the newest label set (largest value) is the current one.
	lora := fams["vllm:lora_requests_info"]
	if lora == nil {
		t.Fatal("lora_requests_info missing")
	}
	var newest map[string]string
	best := -1.0
	for _, m := range lora.Metric {
		if v := m.Gauge.GetValue(); v > best {
			best = v
			newest = map[string]string{}
			for _, l := range m.Label {
				newest[l.GetName()] = l.GetValue()
			}
		}
	}
	if newest["max_lora"] != "1" || newest["running_lora_adapters"] == "" || newest["waiting_lora_adapters"] == "" ||
		newest["running_lora_adapters"] == newest["waiting_lora_adapters"] || best < 1.7e9 {
		t.Errorf("newest lora_requests_info = %v @ %v", newest, best)
	}
	cancel()
	waitFor(t, func() bool { st := s.State(); return st.Running == 0 && st.Waiting == 0 })
	resp, err = c.Get(s.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	fams, err = p.TextToMetricFamilies(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(fams["vllm:lora_requests_info"].Metric); n < 2 {
		t.Errorf("old lora_requests_info label sets not kept: %d series", n)
	}
	if v := fams["vllm:request_success_total"]; v == nil {
		t.Error("request_success_total missing")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestDisconnectAbortsRequest(t *testing.T) {
	s := startServer(t, nil)
	c := newClient(t)
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, "POST", s.URL()+"/v1/completions",
		strings.NewReader(`{"model":"meta-llama/Llama-3.1-8B-Instruct","prompt":"hello","max_tokens":5000,"ignore_eos":true,"stream":true}`))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(resp.Body).ReadString('\n')
	if !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first line %q", line)
	}
	if st := s.State(); st.Running != 1 || st.ServerLoad != 1 || st.KVUse == 0 {
		t.Fatalf("state while streaming %+v", st)
	}
	cancel()
	resp.Body.Close()
	waitFor(t, func() bool { st := s.State(); return st.Running == 0 && st.ServerLoad == 0 && st.KVUse == 0 })
}

func TestCloseResetsStreamsAndRestart(t *testing.T) {
	s := startServer(t, nil)
	c := newClient(t)
	addr := s.Addr()
	resp := post(t, c, s.URL()+"/v1/completions",
		`{"model":"meta-llama/Llama-3.1-8B-Instruct","prompt":"hello","max_tokens":5000,"ignore_eos":true,"stream":true}`)
	br := bufio.NewReader(resp.Body)
	if line, _ := br.ReadString('\n'); !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first line %q", line)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := io.ReadAll(br)
	resp.Body.Close()
	if err == nil {
		t.Fatal("stream ended cleanly after Close, want a reset")
	}
	t.Logf("stream after Close: %v", err)
	if _, err := c.Get(s.URL() + "/health"); err == nil {
		t.Fatal("closed server still answers")
	}
	if st := s.State(); st.Running != 0 || st.ServerLoad != 0 {
		t.Errorf("state after Close %+v", st)
	}

	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if s.Addr() != addr {
		t.Errorf("restarted on %s, want %s", s.Addr(), addr)
	}
	r2 := post(t, c, s.URL()+"/v1/completions", `{"model":"meta-llama/Llama-3.1-8B-Instruct","prompt":"again","max_tokens":3}`)
	defer r2.Body.Close()
	if r2.StatusCode != 200 {
		t.Errorf("after Restart: status %d", r2.StatusCode)
	}
	if st := s.State(); st.Finished != 1 {
		t.Errorf("restarted engine is not fresh: finished %d", st.Finished)
	}
}

func TestFaults(t *testing.T) {
	s := startServer(t, nil)
	c := newClient(t)
	body := `{"model":"meta-llama/Llama-3.1-8B-Instruct","prompt":"hello","max_tokens":3}`

	s.SetFaults(Faults{FailRate: 1})
	resp := post(t, c, s.URL()+"/v1/completions", body)
	resp.Body.Close()
	if resp.StatusCode != 500 {
		t.Errorf("FailRate 1: status %d", resp.StatusCode)
	}

	s.SetFaults(Faults{ProbeDelay: 150 * time.Millisecond})
	start := time.Now()
	resp, err := c.Get(s.URL() + "/load")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("ProbeDelay: /load answered in %v", d)
	}

	s.SetFaults(Faults{ProbeHang: true, Hang: true})
	short := &http.Client{Transport: c.Transport, Timeout: 100 * time.Millisecond}
	for _, p := range []string{"/metrics", "/load"} {
		if resp, err := short.Get(s.URL() + p); err == nil {
			resp.Body.Close()
			t.Errorf("ProbeHang: %s answered", p)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", s.URL()+"/v1/completions", strings.NewReader(body))
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	waitFor(t, func() bool { return s.State().ServerLoad == 1 })
	s.SetFaults(Faults{})
	resp, err = c.Get(s.URL() + "/load")
	if err != nil {
		t.Fatal(err)
	}
	var load struct {
		ServerLoad int `json:"server_load"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&load)
	resp.Body.Close()
	if load.ServerLoad != 1 {
		t.Errorf("/load = %d with one hanging request", load.ServerLoad)
	}
	select {
	case <-done:
		t.Fatal("Hang: completion answered")
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("hanging request ended with %v", err)
	}

	// Slowdown stretches steps.
	s.SetFaults(Faults{Slowdown: 4})
	start = time.Now()
	resp = post(t, c, s.URL()+"/v1/completions", `{"model":"meta-llama/Llama-3.1-8B-Instruct","prompt":"x","max_tokens":200,"ignore_eos":true}`)
	resp.Body.Close()
	slow := time.Since(start)
	s.SetFaults(Faults{})
	start = time.Now()
	resp = post(t, c, s.URL()+"/v1/completions", `{"model":"meta-llama/Llama-3.1-8B-Instruct","prompt":"x","max_tokens":200,"ignore_eos":true}`)
	resp.Body.Close()
	if fast := time.Since(start); slow < 2*fast {
		t.Errorf("Slowdown 4: %v vs %v without", slow, fast)
	}
}

func TestMetricsIntervalLags(t *testing.T) {
	s := startServer(t, func(c *Config) { c.Faults.MetricsInterval = time.Hour })
	c := newClient(t)
	running := func() float64 {
		resp, err := c.Get(s.URL() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return fams["vllm:num_requests_running"].Metric[0].Gauge.GetValue()
	}
	if running() != 0 {
		t.Fatal("running at start")
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", s.URL()+"/v1/completions",
			strings.NewReader(`{"model":"meta-llama/Llama-3.1-8B-Instruct","prompt":"x","max_tokens":5000,"ignore_eos":true}`))
		if resp, err := c.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	waitFor(t, func() bool { return s.State().Running == 1 })
	if running() != 0 {
		t.Error("gauge refreshed although MetricsInterval has not passed")
	}
	s.SetFaults(Faults{})
	if running() != 1 {
		t.Error("gauge not refreshed without MetricsInterval")
	}
}

func TestModelsHealthState(t *testing.T) {
	f, err := StartFleet(3, "127.0.0.1", 0, func() Config {
		c := DefaultConfig()
		c.LoRAs = []string{"sql-lora"}
		return c
	}())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := newClient(t)
	urls := f.URLs()
	if len(urls) != 3 || len(f.Addrs()) != 3 || len(f.Servers()) != 3 || urls[0] == urls[1] {
		t.Fatalf("fleet urls %v", urls)
	}
	for _, u := range urls {
		resp, err := c.Get(u + "/health")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("health %v", err)
		}
		resp.Body.Close()
	}
	resp, err := c.Get(urls[1] + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var models struct {
		Data []struct {
			ID     string  `json:"id"`
			Parent *string `json:"parent"`
		} `json:"data"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&models)
	resp.Body.Close()
	if len(models.Data) != 2 || models.Data[0].Parent != nil || models.Data[1].ID != "sql-lora" ||
		models.Data[1].Parent == nil || *models.Data[1].Parent != models.Data[0].ID {
		t.Errorf("models %+v", models)
	}
	resp, err = c.Get(urls[2] + "/sim/state")
	if err != nil {
		t.Fatal(err)
	}
	var st State
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Error(err)
	}
	resp.Body.Close()
	if seeds := []int64{f.Servers()[0].Config().Seed, f.Servers()[2].Config().Seed}; !slices.Equal(seeds, []int64{0, 2}) {
		t.Errorf("per-server seeds %v", seeds)
	}
}

func TestWallTimingFollowsModel(t *testing.T) {
	s := startServer(t, func(c *Config) { c.TimeScale = 0.5 })
	c := newClient(t)
	start := time.Now()
	resp := post(t, c, s.URL()+"/v1/completions", `{"model":"meta-llama/Llama-3.1-8B-Instruct","prompt":"hello","max_tokens":100,"ignore_eos":true}`)
	resp.Body.Close()
	wall := time.Since(start)
	st := s.Stats()
	model := time.Duration(st.E2E.Sum * float64(time.Second) * 0.5)
	t.Logf("wall %v, modelled e2e %v x 0.5 = %v", wall, time.Duration(st.E2E.Sum*float64(time.Second)), model)
	if wall < model*9/10 || wall > model*3/2+20*time.Millisecond {
		t.Errorf("wall time %v does not follow the model's %v", wall, model)
	}
}

// TestMetricsPrefillInWallSeconds: the server renders its prefill time in
// its own wall seconds (the engine's virtual seconds times TimeScale), as a
// real server measures it, so that a proxy can compare it with its own
// clock; the computed prompt tokens are as counted.
func TestMetricsPrefillInWallSeconds(t *testing.T) {
	s := startServer(t, nil)
	c := newClient(t)
	resp, err := c.Post(s.URL()+"/v1/completions", "application/json",
		strings.NewReader(`{"model":"meta-llama/Llama-3.1-8B-Instruct","prompt":"`+strings.Repeat("tokens ", 800)+`","max_tokens":3,"ignore_eos":true}`))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	waitFor(t, func() bool { return s.State().Finished == 1 })
	st := s.Stats()
	resp, err = c.Get(s.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	tp := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := tp.TextToMetricFamilies(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	hist := func(name string) (sum float64, count uint64) {
		f := fams[name]
		if f == nil || len(f.Metric) != 1 || f.Metric[0].Histogram == nil {
			t.Fatalf("histogram %s missing", name)
		}
		h := f.Metric[0].Histogram
		return h.GetSampleSum(), h.GetSampleCount()
	}
	secs, n := hist("vllm:request_prefill_time_seconds")
	if want := st.PrefillTime.Sum * 0.05; n != 1 || st.PrefillTime.Sum <= 0 || math.Abs(secs-want) > 1e-12 {
		t.Errorf("prefill time sum %v over %d requests, want %v (virtual %v s x TimeScale 0.05)", secs, n, want, st.PrefillTime.Sum)
	}
	toks, _ := hist("vllm:request_prefill_kv_computed_tokens")
	if toks != st.PrefillComputed.Sum || toks < 700 {
		t.Errorf("computed tokens %v, engine %v", toks, st.PrefillComputed.Sum)
	}
}
