package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/probegate/probegate/bench"
)

// TestClassify names each way an exchange can fail, as the soak's report
// counts them (the cause names are the soak's output contract). The
// exchanges are what bench.Post records (bench/sse_test.go plays each of
// them from a raw server).
func TestClassify(t *testing.T) {
	refused := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	timeout := fmt.Errorf("Post: %w", os.ErrDeadlineExceeded) // a net.Error whose Timeout() is true
	choices := []byte(`{"id":"x","choices":[{"text":"hi"}]}`)
	tests := []struct {
		name   string
		x      bench.Exchange
		stream bool
		cause  string
		detail string
	}{
		{"connection refused", bench.Exchange{Err: refused}, true, "transport_before", refused.Error()},
		{"no answer in time", bench.Exchange{Err: timeout}, false, "timeout_before", timeout.Error()},
		{"error status", bench.Exchange{Status: 503, Body: []byte(`{"error":{}}`)}, true, "status_503", `{"error":{}}`},
		{"error status, not streamed", bench.Exchange{Status: 429, Body: []byte("busy")}, false, "status_429", "busy"},
		{"error frame", bench.Exchange{Status: 200, ErrorFrame: []byte(`{"error":{"code":502}}`)}, true, "error_frame", `data: {"error":{"code":502}}`},
		{"stream broke", bench.Exchange{Status: 200, Err: io.ErrUnexpectedEOF}, true, "transport", "unexpected EOF"},
		{"stream stalled", bench.Exchange{Status: 200, Err: timeout, Frames: []bench.Frame{{Texts: 1}}}, true, "timeout", timeout.Error()},
		{"stream ended early", bench.Exchange{Status: 200, Err: io.EOF, Frames: []bench.Frame{{Texts: 1}}}, true, "truncated", "stream ended without [DONE]"},
		{"stream complete", bench.Exchange{Status: 200, Done: true, Frames: []bench.Frame{{Texts: 1}}}, true, "", ""},
		{"stream complete without text", bench.Exchange{Status: 200, Done: true}, true, "", ""},
		{"answer complete", bench.Exchange{Status: 200, Body: choices}, false, "", ""},
		{"answer without choices", bench.Exchange{Status: 200, Body: []byte(`{"id":"x"`)}, false, "truncated", `{"id":"x"`},
		{"answer broke", bench.Exchange{Status: 200, Body: choices[:5], Err: io.ErrUnexpectedEOF}, false, "transport", "unexpected EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cause, detail := classify(&tt.x, tt.stream)
			if cause != tt.cause || detail != tt.detail {
				t.Fatalf("classify = %q, %q; want %q, %q", cause, detail, tt.cause, tt.detail)
			}
			if cause != "" {
				want := phaseUnderWay
				if tt.x.Status != 200 {
					want = phaseBefore
				}
				if ph := phaseOf(cause); ph != want {
					t.Fatalf("phaseOf(%q) = %s, want %s", cause, ph, want)
				}
			}
		})
	}
}
