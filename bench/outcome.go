package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// Outcome is what the client measured for one request.
type Outcome struct {
	Index  int
	Sent   time.Duration // actual send time from the run's start
	Lag    time.Duration // Sent - scheduled time
	TTFT   time.Duration // to the first data frame carrying generated text
	E2E    time.Duration // to the end of the stream ([DONE])
	ITLs   []time.Duration
	Tokens int
	// PromptTokens is the prompt length the server reported in the
	// stream's usage frame (0 if it sent none).
	PromptTokens int
	// UsageTokens is the completion length the server reported there.
	UsageTokens int
	Status      int
	Err         string
	Direct      bool
	Replica     int
	Step        int
}

// OK reports whether the request succeeded: 200 and a complete stream.
func (o *Outcome) OK() bool { return o.Err == "" && o.Status == http.StatusOK }

// NewHTTPClient returns the shared streaming client of a run: keep-alive,
// no compression, enough idle connections per host for the run's peak
// concurrency, idle connections dropped before vLLM's 5 s keep-alive.
func NewHTTPClient() *http.Client { return newHTTPClient(2 * time.Second) }

// newHTTPClient is NewHTTPClient with dials bounded by dial.
func newHTTPClient(dial time.Duration) *http.Client {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: dial, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        4096,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     4 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
		WriteBufferSize:     8 << 10,
		ReadBufferSize:      8 << 10,
	}
	return &http.Client{Transport: tr}
}

type completionBody struct {
	Model     string `json:"model"`
	Prompt    string `json:"prompt"`
	MaxTokens int    `json:"max_tokens"`
	Stream    bool   `json:"stream"`
	IgnoreEOS bool   `json:"ignore_eos"`
	// StreamOptions asks for the final usage frame (prompt and completion
	// token counts), as `vllm bench serve` does.
	StreamOptions streamOptions `json:"stream_options"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// exchanges recycles Exchanges (and their Frames) across requests.
var exchanges = sync.Pool{New: func() any { return new(Exchange) }}

// streamCompletion sends r as a streaming /v1/completions request to base
// with the shared client (Post) and records what it saw in o.
func streamCompletion(ctx context.Context, c *http.Client, base string, r *Req, o *Outcome) {
	body, _ := json.Marshal(completionBody{Model: r.Model, Prompt: r.Prompt, MaxTokens: r.MaxTokens, Stream: true, IgnoreEOS: true,
		StreamOptions: streamOptions{IncludeUsage: true}})
	x := exchanges.Get().(*Exchange)
	defer exchanges.Put(x)
	postID(ctx, c, base+"/v1/completions", body, true, r.ID, x)
	o.record(x)
}

// record turns what a streaming request saw into o's measurements. TTFT is
// from just before the request was written to the first frame carrying
// text; each ITL is the gap between two such frames; E2E is to [DONE]. Err
// says why the request failed, if it did: it could not be sent, a non-200
// status (with the start of its body), an error frame, a stream that ended
// before [DONE], or a stream without any text.
func (o *Outcome) record(x *Exchange) {
	o.Status = x.Status
	o.PromptTokens, o.UsageTokens = x.PromptTokens, x.CompletionTokens
	if len(x.Frames) > 0 {
		o.TTFT = x.Frames[0].At
		o.Tokens = x.Tokens()
	}
	if len(x.Frames) > 1 {
		o.ITLs = make([]time.Duration, len(x.Frames)-1)
		for i := 1; i < len(x.Frames); i++ {
			o.ITLs[i-1] = x.Frames[i].At - x.Frames[i-1].At
		}
	}
	switch {
	case x.Status == 0:
		o.Err = x.Err.Error()
	case x.Status != http.StatusOK:
		o.Err = fmt.Sprintf("status %d: %s", x.Status, bytes.TrimSpace(x.Body))
	case x.ErrorFrame != nil:
		o.Err = "stream error: " + string(x.ErrorFrame)
	case !x.Done:
		o.Err = "stream ended before [DONE]: " + x.Err.Error()
	default:
		o.E2E = x.End
		if o.Tokens == 0 {
			o.Err = "no tokens"
		}
	}
}
