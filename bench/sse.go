package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
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
func NewHTTPClient() *http.Client {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
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

// streamCompletion sends r as a streaming /v1/completions request to base and
// reads the SSE stream, timing each data frame that carries text. TTFT is
// measured from just before the request is written to the arrival of the
// first such frame.
func streamCompletion(ctx context.Context, c *http.Client, base string, r *Req, o *Outcome) {
	body, _ := json.Marshal(completionBody{Model: r.Model, Prompt: r.Prompt, MaxTokens: r.MaxTokens, Stream: true, IgnoreEOS: true,
		StreamOptions: streamOptions{IncludeUsage: true}})
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		o.Err = err.Error()
		return
	}
	hreq.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := c.Do(hreq)
	if err != nil {
		o.Err = err.Error()
		return
	}
	defer resp.Body.Close()
	o.Status = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		o.Err = fmt.Sprintf("status %d: %s", resp.StatusCode, bytes.TrimSpace(msg))
		return
	}
	br := bufio.NewReaderSize(resp.Body, 16<<10)
	var last time.Time
	done := false
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			line = bytes.TrimRight(line, "\r\n")
			if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
				now := time.Now()
				switch {
				case bytes.Equal(data, []byte("[DONE]")):
					done = true
				case bytes.HasPrefix(data, []byte(`{"error"`)):
					o.Err = "stream error: " + string(data)
				case bytes.Contains(data, []byte(`"usage":{`)) && bytes.Contains(data, []byte(`"choices":[]`)):
					o.PromptTokens = usageInt(data, `"prompt_tokens":`)
					o.UsageTokens = usageInt(data, `"completion_tokens":`)
				default:
					n := textTokens(data)
					if n > 0 {
						if o.Tokens == 0 {
							o.TTFT = now.Sub(start)
						} else {
							o.ITLs = append(o.ITLs, now.Sub(last))
						}
						o.Tokens += n
						last = now
					}
				}
			}
		}
		if done {
			break
		}
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if o.Err == "" {
				o.Err = "stream ended before [DONE]: " + err.Error()
			}
			return
		}
	}
	o.E2E = time.Since(start)
	if o.Err == "" && o.Tokens == 0 {
		o.Err = "no tokens"
	}
}

// textTokens returns how many choices in an SSE data frame carry non-empty
// generated text ("text" for completions, "content" for chat). It scans
// bytes rather than unmarshalling: the client must stay cheap next to the
// proxy it measures.
func textTokens(data []byte) int {
	n := 0
	for _, key := range [][]byte{[]byte(`"text":"`), []byte(`"content":"`)} {
		rest := data
		for {
			i := bytes.Index(rest, key)
			if i < 0 {
				break
			}
			rest = rest[i+len(key):]
			if len(rest) > 0 && rest[0] != '"' {
				n++
			}
		}
	}
	return n
}

// usageInt returns the integer after key in data, or 0.
func usageInt(data []byte, key string) int {
	i := bytes.Index(data, []byte(key))
	if i < 0 {
		return 0
	}
	n := 0
	for _, c := range data[i+len(key):] {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
	}
	return n
}
