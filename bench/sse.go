package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"time"
)

// This file is the one client that reads completion answers, for the bench
// (which turns what it saw into an Outcome: outcome.go) and the soak (which
// classifies why a request failed: bench/cmd/soak). It records what it saw
// and judges nothing.

// Exchange is what one /v1/completions request saw, from sending to the
// end of reading. Exactly one of these holds:
//   - Status == 0: no response arrived; Err is why (the request could not
//     be built, the connection failed, the client timed out).
//   - Status != 200: Body holds the start of the answer (up to 512 bytes).
//   - Status == 200, not streamed: Body holds the whole answer, Err a read
//     error (nil when it was read to its end).
//   - Status == 200, streamed: reading stopped at [DONE] (Done), at the
//     first error frame (ErrorFrame != nil), or because the body ended
//     (Err is io.EOF for a clean end, another error for a broken one).
type Exchange struct {
	// Start is when the request was about to be written; the arrival times
	// of frames are measured from it.
	Start time.Time
	// End is when reading stopped: at [DONE], at the error frame or at the
	// read error. Zero when no response arrived.
	End time.Duration
	// Status is the response's status code; 0 when no response arrived.
	Status int
	// Body is the start of a non-200 answer, or a non-streamed 200 answer.
	Body []byte
	// Frames are the data frames that carried generated text, in order.
	Frames []Frame
	// ErrorFrame is the data of the first frame that is an error object
	// ({"error":...}); reading stops there.
	ErrorFrame []byte
	// Done is true when the stream ended with data: [DONE].
	Done bool
	// PromptTokens and CompletionTokens are the counts of the stream's usage
	// frame (0 when it sent none).
	PromptTokens, CompletionTokens int
	// Err is why reading stopped short, as described above; nil otherwise.
	Err error
}

// Frame is one SSE data frame that carried generated text.
type Frame struct {
	At    time.Duration // arrival, from Exchange.Start
	Texts int           // choices in the frame with non-empty text
}

// Tokens returns how many text-carrying choices the stream delivered (one
// per generated token with vLLM's default streaming).
func (x *Exchange) Tokens() int {
	n := 0
	for _, f := range x.Frames {
		n += f.Texts
	}
	return n
}

// errorBodyMax bounds how much of a non-200 answer is kept.
const errorBodyMax = 512

// Post sends body (a /v1/completions request; stream says whether it asks
// for SSE) to url with c and reads the answer into x. x is reset first; its
// Frames keep their capacity, so a caller may reuse one Exchange. Frame
// arrival times are taken as each line is read: the client scans bytes and
// allocates only to grow Frames, so it stays cheap next to what it
// measures.
func Post(ctx context.Context, c *http.Client, url string, body []byte, stream bool, x *Exchange) {
	postID(ctx, c, url, body, stream, "", x)
}

// postID is Post with an X-Request-Id header when id is not empty.
func postID(ctx context.Context, c *http.Client, url string, body []byte, stream bool, id string, x *Exchange) {
	*x = Exchange{Frames: x.Frames[:0]}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		x.Start, x.Err = time.Now(), err
		return
	}
	req.Header.Set("Content-Type", "application/json")
	if id != "" {
		req.Header.Set("X-Request-Id", id)
	}
	x.Start = time.Now()
	resp, err := c.Do(req)
	if err != nil {
		x.Err = err
		return
	}
	defer resp.Body.Close()
	x.Status = resp.StatusCode
	switch {
	case resp.StatusCode != http.StatusOK:
		x.Body, _ = io.ReadAll(io.LimitReader(resp.Body, errorBodyMax))
	case !stream:
		x.Body, x.Err = io.ReadAll(resp.Body)
	default:
		x.readStream(resp.Body)
		return
	}
	x.End = time.Since(x.Start)
}

// readStream reads SSE lines until [DONE], the first error frame or the end
// of the body. A line longer than the reader's buffer is seen in pieces, of
// which only the first starts with "data: ".
func (x *Exchange) readStream(r io.Reader) {
	br := bufio.NewReaderSize(r, 16<<10)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			line = bytes.TrimRight(line, "\r\n")
			if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
				at := time.Since(x.Start)
				switch {
				case bytes.Equal(data, []byte("[DONE]")):
					x.Done, x.End = true, at
					return
				case bytes.HasPrefix(data, []byte(`{"error"`)):
					x.ErrorFrame, x.End = bytes.Clone(data), at
					return
				case bytes.Contains(data, []byte(`"usage":{`)) && bytes.Contains(data, []byte(`"choices":[]`)):
					x.PromptTokens = usageInt(data, `"prompt_tokens":`)
					x.CompletionTokens = usageInt(data, `"completion_tokens":`)
				default:
					if n := textTokens(data); n > 0 {
						x.Frames = append(x.Frames, Frame{At: at, Texts: n})
					}
				}
			}
		}
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			x.Err, x.End = err, time.Since(x.Start)
			return
		}
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
