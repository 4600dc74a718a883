package route

import "github.com/valyala/fasthttp"

// An explicit overload answer never counts against a backend's breaker.
//
// A 503 with Retry-After is how an HTTP server says it is alive but has no
// room now (RFC 9110, 15.6.4): admission control in front of vLLM, a
// serving stack that sheds load. Counted as a failure, it would eject the
// busiest pod for open_for whenever another pod served the same body (the
// second opinion, second_opinion.go) or the canary, queued behind the
// batch, failed too; its traffic then lands on the other pods, which
// overload in turn. And a client who can fill one pod (long prompts
// aimed at it by prefix affinity) could open its breaker at will. So such
// an answer is re-sent to another backend when it can be, as any 5xx is
// (retries_total{reason="server_error"}, resent_server_errors_total), and
// its breaker ticket is decided at once as neither success nor failure
// (breaker_excused_total{reason="overloaded"}), without a canary. A 429
// was never a failure (outcomeForStatus) and still goes to the client: it
// asks the client to slow down. A 503 without Retry-After keeps the
// canary and the second opinion: a dead engine or a broken pod does not
// promise a retry time. The cost: a pod that answers 503 with Retry-After
// to everything is never ejected; its requests go to the others when a
// retry is left, and the policies see its load.

// overloaded reports whether an answer with status and head h is the
// backend's explicit overload answer: 503 with a Retry-After field.
func overloaded(status int, h *fasthttp.ResponseHeader) bool {
	return status == fasthttp.StatusServiceUnavailable && len(h.Peek(fasthttp.HeaderRetryAfter)) > 0
}
