package route

import (
	"errors"

	"github.com/valyala/fasthttp"
)

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
// (breaker_excused_total{reason="overloaded"}), without a canary. A 503
// without Retry-After keeps the canary and the second opinion: a dead
// engine or a broken pod does not promise a retry time. The cost: a pod
// that answers 503 with Retry-After to everything is never ejected; its
// requests go to the others when a retry is left, and the policies see
// its load.
//
// A 429 is never a failure (outcomeForStatus), and it too is re-sent to
// another backend when it can be (one re-send per request, within
// upstream.retries: retries_total{reason="too_many_requests"}); when it
// cannot be, or the other backend answers 429 as well, it reaches the
// client as the backend sent it, Retry-After included. vLLM itself never
// answers 429 (its overload answers, where it has any, are 503); a 429
// behind this proxy comes from something in front of one pod: a sidecar's
// local rate limit (Envoy's local_ratelimit filter keeps one token bucket
// per Envoy process, so per pod), an authenticating layer's per-pod quota.
// That is one pod's admission limit, not the fleet's, and passing it to
// the client would lose an answer another pod could give: the client, who
// cannot choose a pod, only backs off. Where the limit is shared by every
// pod (one quota service), the re-send costs one more refused attempt, a
// few milliseconds, and the client gets the same 429. Where each pod
// keeps its own per-client bucket, the re-send lets a client use a second
// pod's bucket, as a load balancer spreading that client over the pods
// already does.

// errTooManyRequests is a 429 answer the proxy re-sends instead of
// answering with it.
var errTooManyRequests = errors.New("upstream answered 429: re-sent to another backend")

// overloaded reports whether an answer with status and head h is the
// backend's explicit overload answer: 503 with a Retry-After field.
func overloaded(status int, h *fasthttp.ResponseHeader) bool {
	return status == fasthttp.StatusServiceUnavailable && len(h.Peek(fasthttp.HeaderRetryAfter)) > 0
}
