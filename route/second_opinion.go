package route

import (
	"errors"

	"github.com/probegate/probegate/breaker"
)

// A 5xx answer is re-sent once to another backend, which gives the
// backend's breaker a second opinion.
//
// The canary (canary.go) excuses a 5xx when the backend answers a request
// no client shapes. That protects a healthy pod from bodies that make
// vLLM fail (EngineGenerateError), but it also excuses a pod that answers
// the canary and fails every client request (one broken route, a broken
// tokenizer or adapter path): it was never ejected, and every client
// routed to it lost its request. So, while a retry is left
// (upstream.retries) under upstream.retry_on_reset, and another backend is
// eligible, a 5xx answer does not go to the client: the request is
// re-picked (retries_total{reason="server_error"}), at most once per
// request, and the next backend's answer decides the first one's breaker
// outcome:
//
//   - answered 2xx: another pod served this body, so the 5xx was the
//     first pod's fault. It counts as a failure: the first attempt's
//     breaker ticket is held until the second answer's head and decided
//     then, so a pod failing consecutive_failures bodies in a row that
//     other pods serve is ejected (and its clients got their answers from
//     the others), and a half-open pod's failed trial reopens it;
//   - answered 5xx too: the body fails on two pods, so it is the body's
//     (probegate_breaker_excused_total{reason="also_failed"}), and the
//     second 5xx goes to the client, judged by that backend's canary; a
//     4xx there (the body refused: a bad input, a model that pod does not
//     serve) is no evidence against the first pod either, and goes to the
//     client;
//   - any other failure (reset, timeout, no backend left): no verdict
//     (Ignore); the client gets that failure's error envelope.
//
// A client's bodies can therefore count against a pod only if another pod
// serves them, which a poison body (one that fails on every pod) never
// does. The cost: a request answered 5xx by its first pod waits for a
// second attempt, and a poison body costs two pods one failed request
// each. A request the proxy cannot re-send (no retry left, no other
// eligible backend, retry_on_reset false) keeps the canary's judgement.

// errServerError is a 5xx answer the proxy re-sends instead of answering
// with it.
var errServerError = errors.New("upstream answered 5xx: re-sent for a second opinion")

// resendable reports whether an answer to the attempt under way is re-sent
// rather than passed to the client: rc.resend5xx (a retry left, no answer
// re-sent yet) and an eligible backend other than those tried. Asked on a
// 5xx answer (second opinion, overload) and on a 429 (overload.go).
func (p *Proxy) resendable(rc *reqCtx) bool {
	if !rc.resend5xx {
		return false
	}
	tried := rc.tried[:rc.ntried]
	for _, c := range p.snap.Load().pool.Backends() {
		if c.Eligible() && !contains(tried, c) {
			return true
		}
	}
	return false
}

// secondOpinion decides the breaker outcome of rc.suspect's re-sent 5xx
// from the status the next backend answered.
func (p *Proxy) secondOpinion(rc *reqCtx, status int) {
	b, t := rc.suspect, rc.suspectTicket
	rc.suspect, rc.suspectTicket = nil, breaker.Ticket{}
	if status >= 300 {
		// 5xx there too, or a 4xx refusal of the same body (another
		// model, a bad input): no evidence against b.
		t.Done(p.excuse(excuseAlsoFailed))
		return
	}
	t.Done(breaker.Failure)
	p.log.Debug().Str("backend", b.addr).Msg("a 5xx answer counted: another backend served the same request")
}
