package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// step is one action of a scripted server: write raw bytes, then sleep.
type step struct {
	write string
	sleep time.Duration
}

// scripted returns an http.Client whose every connection is one end of a
// net.Pipe served by a goroutine that reads the request and plays steps
// byte for byte: a raw server, so it can send what no well-behaved one
// would. Inside a synctest bubble its sleeps are virtual, so arrival times
// are exact. The server closes the connection when the script ends or the
// client hangs up; the test's cleanup waits for every script to end.
func scripted(t *testing.T, steps ...step) *http.Client {
	var servers sync.WaitGroup
	t.Cleanup(servers.Wait) // within the bubble: every script has ended
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			srv, cli := net.Pipe()
			servers.Add(1)
			go func() {
				defer servers.Done()
				defer srv.Close()
				if _, err := http.ReadRequest(bufio.NewReader(srv)); err != nil {
					t.Errorf("scripted server: reading the request: %v", err)
					return
				}
				for _, s := range steps {
					if _, err := io.WriteString(srv, s.write); err != nil {
						return // the client hung up
					}
					time.Sleep(s.sleep)
				}
			}()
			return cli, nil
		},
		DisableKeepAlives: true,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

const sseHead = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"

// chunk frames s as one HTTP/1.1 chunk.
func chunk(s string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(s), s) }

// frame is one SSE data line carrying one token of text.
func frame(text string) string {
	return chunk(`data: {"id":"c","choices":[{"index":0,"text":"` + text + `"}]}` + "\n\n")
}

const lastChunk = "0\r\n\r\n"

func post(t *testing.T, c *http.Client, stream bool) *Exchange {
	t.Helper()
	var x Exchange
	Post(context.Background(), c, "http://pod/v1/completions", []byte(`{"model":"m","prompt":"hi"}`), stream, &x)
	return &x
}

// TestPostTimesEveryFrame: frame arrival times, the usage frame and [DONE]
// are recorded exactly (virtual time), and the bench's Outcome derives TTFT,
// ITLs, E2E and tokens from them.
func TestPostTimesEveryFrame(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := scripted(t,
			step{sseHead, 100 * time.Millisecond},
			step{frame("Hel"), 20 * time.Millisecond},
			step{chunk(`data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}` + "\n\n"), 0}, // no text: not a frame
			step{frame("lo"), 30 * time.Millisecond},
			step{chunk(`data: {"choices":[{"index":0,"text":"!"},{"index":1,"text":"?"}]}` + "\r\n\r\n"), 5 * time.Millisecond},
			step{chunk(`data: {"choices":[],"usage":{"prompt_tokens":17,"completion_tokens":4}}` + "\n\n"), 0},
			step{chunk("data: [DONE]\n\n") + lastChunk, 0},
		)
		x := post(t, c, true)
		if x.Status != 200 || !x.Done || x.Err != nil || x.ErrorFrame != nil {
			t.Fatalf("status %d, done %v, err %v, error frame %q", x.Status, x.Done, x.Err, x.ErrorFrame)
		}
		want := []Frame{{100 * time.Millisecond, 1}, {120 * time.Millisecond, 1}, {150 * time.Millisecond, 2}}
		if fmt.Sprint(x.Frames) != fmt.Sprint(want) {
			t.Fatalf("frames %v, want %v", x.Frames, want)
		}
		if x.End != 155*time.Millisecond || x.PromptTokens != 17 || x.CompletionTokens != 4 || x.Tokens() != 4 {
			t.Fatalf("end %v, usage %d/%d, tokens %d", x.End, x.PromptTokens, x.CompletionTokens, x.Tokens())
		}

		var o Outcome
		o.record(x)
		if !o.OK() || o.TTFT != 100*time.Millisecond || o.E2E != 155*time.Millisecond || o.Tokens != 4 ||
			fmt.Sprint(o.ITLs) != "[20ms 30ms]" || o.PromptTokens != 17 || o.UsageTokens != 4 {
			t.Fatalf("outcome %+v", o)
		}
	})
}

// TestPostFailures plays hostile and broken answers and checks what the
// client saw and the bench's error text (which results.json's error_sample
// carries).
func TestPostFailures(t *testing.T) {
	tests := []struct {
		name    string
		steps   []step
		stream  bool
		check   func(*Exchange) bool
		outcome string // the bench's Outcome.Err
	}{
		{"error status, long body", []step{{"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 1000\r\n\r\n  " + strings.Repeat("x", 998), 0}}, true,
			func(x *Exchange) bool { return x.Status == 503 && len(x.Body) == errorBodyMax && x.Err == nil },
			"status 503: " + strings.Repeat("x", errorBodyMax-2)},
		{"error frame stops reading", []step{{sseHead + frame("a"), time.Millisecond}, {chunk(`data: {"error":{"message":"boom","code":502}}` + "\n\n"), time.Millisecond}, {frame("b") + chunk("data: [DONE]\n\n") + lastChunk, 0}}, true,
			func(x *Exchange) bool {
				return string(x.ErrorFrame) == `{"error":{"message":"boom","code":502}}` && len(x.Frames) == 1 && !x.Done && x.Err == nil
			},
			`stream error: {"error":{"message":"boom","code":502}}`},
		{"clean end before [DONE]", []step{{sseHead + frame("a") + lastChunk, 0}}, true,
			func(x *Exchange) bool { return x.Err == io.EOF && len(x.Frames) == 1 && !x.Done },
			"stream ended before [DONE]: EOF"},
		{"connection cut mid-chunk", []step{{sseHead + frame("a") + "40\r\ndata: {\"cho", 0}}, true,
			func(x *Exchange) bool { return errors.Is(x.Err, io.ErrUnexpectedEOF) && len(x.Frames) == 1 },
			"stream ended before [DONE]: unexpected EOF"},
		{"no text at all", []step{{sseHead + chunk("data: [DONE]\n\n") + lastChunk, 0}}, true,
			func(x *Exchange) bool { return x.Done && x.Err == nil && len(x.Frames) == 0 },
			"no tokens"},
		{"a text line longer than the read buffer", []step{{sseHead + frame(strings.Repeat("y", 40<<10)) + frame("z") + chunk("data: [DONE]\n\n") + lastChunk, 0}}, true,
			func(x *Exchange) bool { return x.Done && x.Err == nil && x.Tokens() == 2 },
			""},
		{"not streamed", []step{{"HTTP/1.1 200 OK\r\nContent-Length: 24\r\n\r\n" + `{"choices":[{"text":""}]}`[:24], 0}}, false,
			func(x *Exchange) bool {
				return x.Status == 200 && string(x.Body) == `{"choices":[{"text":""}]` && x.Err == nil
			},
			""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				x := post(t, scripted(t, tt.steps...), tt.stream)
				if !tt.check(x) {
					t.Fatalf("exchange: status %d, body %q, frames %v, error frame %q, done %v, err %v",
						x.Status, x.Body, x.Frames, x.ErrorFrame, x.Done, x.Err)
				}
				if !tt.stream {
					return // the bench only streams
				}
				var o Outcome
				o.record(x)
				if o.Err != tt.outcome {
					t.Fatalf("Outcome.Err = %q, want %q", o.Err, tt.outcome)
				}
			})
		})
	}
}

// TestPostNoResponse: a refused connection and a client timeout before the
// headers leave Status 0 and the error in Err.
func TestPostNoResponse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		refused := errors.New("connection refused")
		c := &http.Client{Transport: &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) { return nil, refused }}}
		x := post(t, c, true)
		if x.Status != 0 || !errors.Is(x.Err, refused) {
			t.Fatalf("status %d, err %v", x.Status, x.Err)
		}
		var o Outcome
		o.record(x)
		if !strings.Contains(o.Err, "connection refused") {
			t.Fatalf("Outcome.Err = %q", o.Err)
		}

		c = scripted(t, step{"", time.Hour})
		c.Timeout = time.Second
		x = post(t, c, true)
		var ne net.Error
		if x.Status != 0 || !errors.As(x.Err, &ne) || !ne.Timeout() {
			t.Fatalf("status %d, err %v: want a timeout", x.Status, x.Err)
		}
	})
}

func TestPostReusesFrames(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := scripted(t, step{sseHead + frame("a") + frame("b") + chunk("data: [DONE]\n\n") + lastChunk, 0})
		var x Exchange
		Post(context.Background(), c, "http://pod/v1/completions", nil, true, &x)
		first := &x.Frames[0]
		Post(context.Background(), c, "http://pod/v1/completions", nil, true, &x)
		if len(x.Frames) != 2 || &x.Frames[0] != first {
			t.Fatalf("frames %v reallocated (or not reset)", x.Frames)
		}
	})
}
