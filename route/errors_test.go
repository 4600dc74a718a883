package route

import (
	"encoding/json"
	"fmt"
	"net"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/probegate/probegate/breaker"
)

func TestStatusFor(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want int
	}{
		{"no backend", ErrNoBackend, 503},
		{"breaker open", fmt.Errorf("pick: %w", breaker.ErrOpen), 503},
		{"saturated", ErrSaturated, 429},
		{"timeout", fmt.Errorf("x: %w", ErrUpstreamTimeout), 504},
		{"upstream", ErrUpstream, 502},
		{"not sent", ErrNotSent, 503},
		{"unknown", fmt.Errorf("boom"), 502},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := statusFor(c.err); got != c.want {
				t.Fatalf("statusFor(%v) = %d, want %d", c.err, got, c.want)
			}
		})
	}
}

func TestEnvelopeIsVLLMShaped(t *testing.T) {
	for _, status := range []int{400, 404, 413, 431, 429, 502, 503, 504} {
		b := appendEnvelope(nil, status, "bad \"thing\"\n")
		var env struct {
			Error struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Param   *string `json:"param"`
				Code    int     `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(b, &env); err != nil {
			t.Fatalf("status %d: envelope %s is not JSON: %v", status, b, err)
		}
		if env.Error.Code != status || env.Error.Message != "bad \"thing\"\n" || env.Error.Type == "" || env.Error.Param != nil {
			t.Fatalf("status %d: bad envelope %s", status, b)
		}
	}
}

// Every status the proxy answers on its own carries a type of its own:
// only a 502 says BadGatewayError. A 408 (a client that trickled its
// request past server.read_timeout) said BadGatewayError, blaming a model
// server that never saw the request.
func TestEveryOwnStatusHasItsOwnErrorType(t *testing.T) {
	seen := map[string]int{}
	for _, status := range []int{400, 404, 405, 408, 413, 429, 431, 502, 503, 504, 505} {
		typ := errorType(status)
		if prev, ok := seen[typ]; ok {
			t.Errorf("statuses %d and %d share the error type %q", prev, status, typ)
		}
		seen[typ] = status
	}
}

func TestIsDialError(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("connection refused")}
	read := &net.OpError{Op: "read", Net: "tcp", Err: fmt.Errorf("connection reset")}
	if !isDialError(fmt.Errorf("wrapped: %w", dial)) {
		t.Fatal("dial error not recognised")
	}
	if isDialError(read) {
		t.Fatal("a read error may have reached the backend; it must not count as not-sent")
	}
	if !isDialError(fasthttp.ErrNoFreeConns) {
		t.Fatal("no free conns: nothing was sent")
	}
	if isDialError(nil) {
		t.Fatal("nil is not a dial error")
	}
}
