package vllmsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// maxBodyBytes bounds a request body the simulator reads.
const maxBodyBytes = 64 << 20

// httpCounters count requests per route for the http_* filler metrics.
type httpCounters struct {
	completions, chat, models, health, load, metrics, other atomic.Int64
}

// serveHTTP routes every request of a generation.
func (g *generation) serveHTTP(w http.ResponseWriter, r *http.Request) {
	g.handlers.Add(1)
	defer g.handlers.Add(-1)
	if g.closed.Load() {
		panic(http.ErrAbortHandler)
	}
	if id := r.Header.Get("X-Request-Id"); id != "" {
		w.Header().Set("X-Request-Id", id)
	}
	path := r.URL.Path
	switch path {
	case "/v1/completions", "/v1/chat/completions":
		if r.Method != http.MethodPost {
			methodNotAllowed(w)
			return
		}
		chat := path == "/v1/chat/completions"
		if chat {
			g.counters.chat.Add(1)
		} else {
			g.counters.completions.Add(1)
		}
		g.completion(w, r, chat)
	case "/v1/models":
		g.counters.models.Add(1)
		g.models(w)
	case "/health", "/ping":
		g.counters.health.Add(1)
		w.WriteHeader(http.StatusOK)
	case "/version":
		writeJSON(w, http.StatusOK, map[string]string{"version": "0.11.0"})
	case "/load":
		g.counters.load.Add(1)
		if !g.probeFaults(r.Context()) {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		b := append([]byte(`{"server_load":`), strconv.FormatInt(g.inflight.Load(), 10)...)
		_, _ = w.Write(append(b, '}'))
	case "/metrics":
		g.counters.metrics.Add(1)
		if !g.probeFaults(r.Context()) {
			return
		}
		g.writeMetrics(w)
	case "/sim/state":
		writeJSON(w, http.StatusOK, g.s.State())
	default:
		g.counters.other.Add(1)
		writeError(w, http.StatusNotFound, "NotFoundError", "Not Found: "+path)
	}
}

func methodNotAllowed(w http.ResponseWriter) {
	writeError(w, http.StatusMethodNotAllowed, errorType(http.StatusMethodNotAllowed), "Method Not Allowed")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "InternalServerError", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// block waits until the client goes away, or aborts the handler when the
// generation shuts down.
func (g *generation) block(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-g.quit:
		panic(http.ErrAbortHandler)
	}
}

// probeFaults applies ProbeHang and ProbeDelay to /metrics and /load; it reports
// whether the handler should still answer.
func (g *generation) probeFaults(ctx context.Context) bool {
	f := g.s.faults.Load()
	if f.ProbeHang {
		g.block(ctx)
		return false
	}
	if f.ProbeDelay > 0 {
		t := time.NewTimer(f.ProbeDelay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return false
		case <-g.quit:
			return false
		}
	}
	return true
}

func (g *generation) chance(p float64) bool {
	g.rngMu.Lock()
	defer g.rngMu.Unlock()
	return g.rng.Float64() < p
}

func (g *generation) newID() string {
	g.rngMu.Lock()
	a, b := g.rng.Uint64(), g.rng.Uint64()
	g.rngMu.Unlock()
	return fmt.Sprintf("%016x%016x", a, b)
}

// adapterOf maps a request's model to its adapter name ("" for the base model or
// an unknown name).
func (g *generation) adapterOf(model string) string {
	for _, a := range g.cfg.LoRAs {
		if a == model {
			return a
		}
	}
	return ""
}

func (g *generation) knownModel(model string) bool {
	return model == g.cfg.Model || g.adapterOf(model) != ""
}

// stream is one engine request's delivery slot, written by the engine loop
// (deliver) and read by its HTTP handler.
type stream struct {
	req Request
	// progress is the tokens generated so far, shifted left by one, with
	// bit 0 set once the request finished: one word, so that a reader never
	// sees the final count without the end (a stream whose last token frame
	// lacks finish_reason) or the end without the final count.
	progress atomic.Int64
	reason   atomic.Value  // finish reason (string), set before the end bit
	sig      chan struct{} // shared by the streams of one HTTP request; cap 1
}

// deliver publishes one step's result to the request's handler.
func deliver(ev *Event) {
	st, ok := ev.Req.Tag.(*stream)
	if !ok {
		return
	}
	v := int64(ev.Output) << 1
	if ev.Finished {
		st.reason.Store(ev.Reason)
		v |= 1
	}
	st.progress.Store(v)
	select {
	case st.sig <- struct{}{}:
	default:
	}
}

// load returns the tokens generated so far and whether the request finished,
// read together.
func (st *stream) load() (n int, done bool) {
	v := st.progress.Load()
	return int(v >> 1), v&1 == 1
}

func (st *stream) finishReason() string {
	r, _ := st.reason.Load().(string)
	return r
}

// completion serves /v1/completions and /v1/chat/completions.
func (g *generation) completion(w http.ResponseWriter, r *http.Request, chat bool) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes))
	if err != nil {
		return
	}
	g.inflight.Add(1)
	defer g.inflight.Add(-1)
	f := g.s.faults.Load()
	if f.Hang {
		g.block(r.Context())
		return
	}
	req, prompts, err := parseAPIRequest(body, chat, g.cfg.BlockSize, g.adapterOf)
	if err != nil {
		writeError(w, http.StatusBadRequest, "BadRequestError", strings.TrimPrefix(err.Error(), "bad request: "))
		return
	}
	if !g.knownModel(req.Model) {
		writeError(w, http.StatusNotFound, "NotFoundError", fmt.Sprintf("The model `%s` does not exist.", req.Model))
		return
	}
	if f.FailRate > 0 && g.chance(f.FailRate) {
		writeError(w, http.StatusInternalServerError, "InternalServerError", "simulated engine failure")
		return
	}
	maxTokens := 0
	if req.MaxTokens != nil {
		maxTokens = *req.MaxTokens
	}
	adapter := g.adapterOf(req.Model)
	sig := make(chan struct{}, 1)
	streams := make([]stream, len(prompts))
	g.mu.Lock()
	if g.eng.Idle() {
		g.eng.AdvanceTo(g.vnow())
	}
	arrival := g.vnow()
	for i := range streams {
		st := &streams[i]
		st.sig = sig
		st.req = Request{Adapter: adapter, Prompt: prompts[i], MaxTokens: maxTokens, IgnoreEOS: req.IgnoreEOS, Tag: st}
		if err := g.eng.AddAt(&st.req, arrival); err != nil {
			for j := range i {
				g.eng.Abort(&streams[j].req)
			}
			g.mu.Unlock()
			msg := err.Error()
			if errors.Is(err, ErrTooLong) {
				msg = strings.TrimPrefix(msg, ErrTooLong.Error()+": ")
			}
			writeError(w, http.StatusBadRequest, "BadRequestError", msg)
			return
		}
	}
	g.publish()
	// The arrival hook runs before the engine can step again (it steps
	// under g.mu): called after the unlock and the kick, a starved
	// process's engine could finish a short request first, and the hook
	// saw its own pod with no request (bench's records, "shows no request
	// at its own arrival").
	if f := g.s.onArrival.Load(); f != nil {
		(*f)(r.Header.Get("X-Request-Id"))
	}
	g.mu.Unlock()
	g.kick()

	id := r.Header.Get("X-Request-Id")
	if id == "" {
		id = g.newID()
	}
	if chat {
		id = "chatcmpl-" + id
	} else {
		id = "cmpl-" + id
	}
	if req.Stream {
		usage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
		g.streamResponse(w, r.Context(), streams, newSSEFramer(chat, id, req.Model, time.Now().Unix()), usage)
		return
	}
	g.fullResponse(w, r, streams, chat, id, req.Model)
}

func (g *generation) abort(streams []stream) {
	g.mu.Lock()
	for i := range streams {
		g.eng.Abort(&streams[i].req)
	}
	g.publish()
	g.mu.Unlock()
	g.kick()
}

// streamResponse writes SSE frames as vLLM does: headers at once, then per choice
// (chat: a delta.role frame with the first token), one frame per token, the last
// one carrying finish_reason (an EOS stop has empty text), then the include_usage
// frame if asked, then [DONE]. Frames are flushed when produced. A client that goes
// away aborts the requests in the engine.
func (g *generation) streamResponse(w http.ResponseWriter, ctx context.Context, streams []stream, f *sseFramer, includeUsage bool) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if rc.Flush() != nil {
		g.abort(streams)
		return
	}
	sig := streams[0].sig
	sent := make([]int, len(streams))
	closed := make([]bool, len(streams))
	remaining := len(streams)
	buf := make([]byte, 0, 512)
	// write sends and flushes the frames in buf. Frames are flushed as soon as the
	// engine produced them; tokens that arrived together (a handler that lagged a
	// step) share one flush.
	write := func() bool {
		if len(buf) == 0 {
			return true
		}
		_, err := w.Write(buf)
		if err == nil {
			err = rc.Flush()
		}
		buf = buf[:0]
		return err == nil
	}
	for remaining > 0 {
		select {
		case <-sig:
		case <-ctx.Done():
			g.abort(streams)
			return
		case <-g.quit:
			panic(http.ErrAbortHandler) // the pod died: no clean end of response
		}
		for i := range streams {
			st := &streams[i]
			if closed[i] {
				continue
			}
			n, done := st.load()
			if f.chat && sent[i] == 0 && n > 0 {
				buf = f.role(buf, i)
			}
			for k := sent[i] + 1; k <= n; k++ {
				text, finish := tokenText(k), ""
				if done && k == n {
					finish = st.finishReason()
					if finish == FinishStop {
						text = "" // the EOS token
					}
				}
				buf = f.token(buf, i, text, finish)
			}
			sent[i] = n
			if done {
				closed[i] = true
				remaining--
			}
		}
		if !write() {
			g.abort(streams)
			return
		}
	}
	if includeUsage {
		p, c := 0, 0
		for i := range streams {
			p += streams[i].req.Prompt.Tokens
			c += sent[i]
		}
		buf = f.usage(buf, p, c)
	}
	buf = append(buf, doneFrame...)
	write()
}

type usageJSON struct {
	PromptTokens        int `json:"prompt_tokens"`
	TotalTokens         int `json:"total_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails any `json:"prompt_tokens_details"`
}

type completionChoice struct {
	Index          int    `json:"index"`
	Text           string `json:"text"`
	Logprobs       any    `json:"logprobs"`
	FinishReason   string `json:"finish_reason"`
	StopReason     any    `json:"stop_reason"`
	PromptLogprobs any    `json:"prompt_logprobs"`
}

type chatMessageOut struct {
	Role             string `json:"role"`
	ReasoningContent any    `json:"reasoning_content"`
	Content          string `json:"content"`
	ToolCalls        []any  `json:"tool_calls"`
}

type chatChoice struct {
	Index        int            `json:"index"`
	Message      chatMessageOut `json:"message"`
	Logprobs     any            `json:"logprobs"`
	FinishReason string         `json:"finish_reason"`
	StopReason   any            `json:"stop_reason"`
}

type completionResponse struct {
	ID               string    `json:"id"`
	Object           string    `json:"object"`
	Created          int64     `json:"created"`
	Model            string    `json:"model"`
	Choices          any       `json:"choices"`
	Usage            usageJSON `json:"usage"`
	PromptLogprobs   any       `json:"prompt_logprobs,omitempty"`
	KVTransferParams any       `json:"kv_transfer_params"`
}

// generatedText renders n generated tokens; a "stop" finish ends with the empty
// EOS token.
func generatedText(n int, reason string) string {
	if reason == FinishStop {
		n--
	}
	var b strings.Builder
	for k := 1; k <= n; k++ {
		b.WriteString(tokenText(k))
	}
	return b.String()
}

// fullResponse waits for every choice to finish and writes one JSON response with
// usage, plus the ORCA endpoint-load-metrics header when the request asked for it.
func (g *generation) fullResponse(w http.ResponseWriter, r *http.Request, streams []stream, chat bool, id, model string) {
	sig := streams[0].sig
	for {
		all := true
		for i := range streams {
			if _, done := streams[i].load(); !done {
				all = false
				break
			}
		}
		if all {
			break
		}
		select {
		case <-sig:
		case <-r.Context().Done():
			g.abort(streams)
			return
		case <-g.quit:
			panic(http.ErrAbortHandler) // the pod died: no clean end of response
		}
	}
	resp := completionResponse{ID: id, Created: time.Now().Unix(), Model: model}
	var usage usageJSON
	if chat {
		resp.Object = "chat.completion"
		choices := make([]chatChoice, len(streams))
		for i := range streams {
			st := &streams[i]
			n, _ := st.load()
			reason := st.finishReason()
			choices[i] = chatChoice{Index: i, FinishReason: reason,
				Message: chatMessageOut{Role: "assistant", Content: generatedText(n, reason), ToolCalls: []any{}}}
			usage.PromptTokens += st.req.Prompt.Tokens
			usage.CompletionTokens += n
		}
		resp.Choices = choices
	} else {
		resp.Object = "text_completion"
		choices := make([]completionChoice, len(streams))
		for i := range streams {
			st := &streams[i]
			n, _ := st.load()
			reason := st.finishReason()
			choices[i] = completionChoice{Index: i, Text: generatedText(n, reason), FinishReason: reason}
			usage.PromptTokens += st.req.Prompt.Tokens
			usage.CompletionTokens += n
		}
		resp.Choices = choices
	}
	usage.TotalTokens = usage.PromptTokens + usage.CompletionTokens
	resp.Usage = usage
	if v := g.orcaHeader(r.Header.Get("endpoint-load-metrics-format")); v != "" {
		w.Header().Set("endpoint-load-metrics", v)
	}
	writeJSON(w, http.StatusOK, resp)
}

// orcaHeader renders the ORCA endpoint-load-metrics value for format "TEXT" or
// "JSON" (case-insensitive) from the true state; "" for any other format.
func (g *generation) orcaHeader(format string) string {
	st := g.state.Load()
	kv := string(pyFloat(nil, st.KVUse))
	wt := string(pyFloat(nil, float64(st.Waiting)))
	rn := string(pyFloat(nil, float64(st.Running)))
	switch strings.ToUpper(strings.TrimSpace(format)) {
	case "TEXT":
		return "TEXT named_metrics.kv_cache_usage_perc=" + kv +
			", named_metrics.num_requests_waiting=" + wt +
			", named_metrics.num_requests_running=" + rn
	case "JSON":
		return `JSON {"named_metrics":{"kv_cache_usage_perc":` + kv +
			`,"num_requests_waiting":` + wt + `,"num_requests_running":` + rn + `}}`
	}
	return ""
}

type modelCard struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Created     int64  `json:"created"`
	OwnedBy     string `json:"owned_by"`
	Root        string `json:"root"`
	Parent      any    `json:"parent"`
	MaxModelLen any    `json:"max_model_len"`
	Permission  []any  `json:"permission"`
}

// models serves /v1/models: the base model, then each adapter with parent = base.
func (g *generation) models(w http.ResponseWriter) {
	now := g.origin.Unix()
	perm := []any{map[string]any{"id": "modelperm-sim", "object": "model_permission", "created": now,
		"allow_create_engine": false, "allow_sampling": true, "allow_logprobs": true,
		"allow_search_indices": false, "allow_view": true, "allow_fine_tuning": false,
		"organization": "*", "group": nil, "is_blocking": false}}
	data := []modelCard{{ID: g.cfg.Model, Object: "model", Created: now, OwnedBy: "vllm",
		Root: g.cfg.Model, Parent: nil, MaxModelLen: g.cfg.MaxModelLen, Permission: perm}}
	for _, a := range g.cfg.LoRAs {
		data = append(data, modelCard{ID: a, Object: "model", Created: now, OwnedBy: "vllm",
			Root: "/adapters/" + a, Parent: g.cfg.Model, Permission: perm})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}
