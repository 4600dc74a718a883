package route

import (
	"context"
	"encoding/json"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/probegate/probegate/breaker"
	"github.com/probegate/probegate/probe"
)

// A 5xx answer is judged by a canary, not taken on the client's word,
// when it cannot be re-sent for a second opinion (second_opinion.go).
//
// vLLM answers 500 both when its engine died (EngineDeadError: every
// request fails, /health turns 503 and the server exits) and when one
// request's input made generation fail (EngineGenerateError, documented by
// vLLM as request-specific and recoverable), and the two answers look the
// same (500, empty body); a handler's own exception is a 500 with the
// error envelope either way. So a client whose bodies make vLLM answer 500
// could open a healthy pod's breaker with a burst of them. Instead, before
// a 5xx counts, the proxy asks the backend something no client shapes: a
// one-token completion of the model the backend serves (its first
// /v1/models entry, remembered). If the backend answers it without a 5xx
// within upstream.first_byte_timeout, the 5xx is the request's, not the
// pod's: it counts as neither success nor failure
// (probegate_breaker_excused_total{reason="healthy"}). If the canary fails
// too (5xx, reset, timeout, or no model to ask for: a backend that is no
// vLLM), the 5xx is a failure as before. A dead engine or a pod that fails
// every request (vllmsim's FailRate) therefore still opens its breaker,
// after the same consecutive_failures 5xx answers.
//
// The verdict holds for canaryVerdictFor: 5xx answers within it are
// judged by it without another canary, so a flood of them costs the
// backend at most one canary (two small requests) per canaryVerdictFor.
// A canary runs on its own goroutine (one per backend at a time). A 5xx
// answer waits for its verdict at most canaryWait before it goes to the
// client: a dead engine answers the canary at once, so its 5xx is counted
// when the client has it; a canary that takes longer (a healthy pod
// scheduling it behind its batch, a hung engine) decides the 5xx's breaker
// outcome when its verdict comes, within first_byte_timeout, and the
// client's error does not wait for it. Nothing of this is on the path of
// a request that is not answered 5xx; it takes no lock (a round is claimed
// by compare-and-swap, and the 5xx answers left to a round's verdict are
// counted on a lock-free list the round seals when it ends). That list
// holds one entry per breaker state (Ticket equality), not per 5xx: a
// flood of 5xx answers during a slow canary (one pod, retries 0, or no
// other backend eligible) costs one entry while the breaker stays closed,
// not one per answer for up to first_byte_timeout.
type canary struct {
	okUntil  atomic.Int64 // p.now() Unix ns until which the backend passed its last canary
	badUntil atomic.Int64 // ... failed it
	model    atomic.Pointer[string]
	round    atomic.Pointer[canaryRound] // the canary under way, nil when none
}

// canaryRound is one canary: ok is its verdict, valid once done is closed.
// pending holds the tickets of 5xx answers that went to their clients
// before the verdict; the round decides them and stores roundSealed.
type canaryRound struct {
	done    chan struct{}
	ok      bool
	pending atomic.Pointer[pendingTickets]
}

// pendingTickets counts the breaker claims of 5xx answers left to a
// round's verdict that are equal to t (admitted in the same breaker
// state, so interchangeable: breaker.Ticket). n is how many; the round
// swaps in countSealed when it decides them.
type pendingTickets struct {
	t    breaker.Ticket
	n    atomic.Int64
	next *pendingTickets
}

// countSealed is a pendingTickets count the round has decided: a ticket
// can no longer join it.
const countSealed = -1

// join adds one ticket to e's count, unless the round has decided it.
func (e *pendingTickets) join() bool {
	for {
		n := e.n.Load()
		if n == countSealed {
			return false
		}
		if e.n.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// roundSealed marks a round's pending list once the round decided it: a
// ticket that finds it is decided by its own caller.
var roundSealed = new(pendingTickets)

// canaryWait bounds how long a 5xx answer waits for its canary's verdict
// before it goes to the client (first_byte_timeout when shorter). The
// wait only keeps the breaker's count in step with what the client saw:
// vLLM's error path answers a dead engine's canary 500 without scheduling
// anything (a millisecond or two on a LAN), well within it, so the
// consecutive_failures-th 5xx of a dead engine has opened the breaker
// when its client has it, and the client's next request goes elsewhere. A
// canary that needs longer is being scheduled by a working engine (one
// decode step of a busy batch is tens of ms) or not answered at all: the
// client already has its error and does not wait for that. Not a config
// key: it changes no verdict, only when the breaker learns it, and a
// client's error is at most this much later than without the canary.
const canaryWait = 100 * time.Millisecond

// canaryVerdictFor is how long a canary's verdict judges later 5xx
// answers. Not a config key: it bounds only how often a backend answering
// 5xx is asked (once a second at most) and how long a pod that just died
// is judged healthy (its 5xx answers then count from the next second on).
const canaryVerdictFor = time.Second

// sender is what the canary needs of the fetcher: the proxy's own
// requests over its pooled client (probe.HTTPFetcher). A Fetcher without
// it (a test's, the benchmark's) leaves every 5xx a failure.
type sender interface {
	Send(ctx context.Context, s *probe.State, req *fasthttp.Request, resp *fasthttp.Response) error
}

// judgeServerError decides ticket, the breaker claim of a 5xx answer
// from b: Ignore when b answers a canary (a fresh verdict's, or the one
// this call starts or joins), else Failure. It returns once the ticket is
// decided or canaryWait has passed, whichever is first; in the second case
// the round decides the ticket when its verdict comes.
func (p *Proxy) judgeServerError(rt *settings, b *Backend, ticket breaker.Ticket) {
	snd, ok := p.fetcher.(sender)
	if !ok {
		ticket.Done(breaker.Failure)
		return
	}
	c := &b.canary
	for {
		now := p.now().UnixNano()
		if now < c.okUntil.Load() {
			ticket.Done(p.excuse(excuseHealthy))
			return
		}
		if now < c.badUntil.Load() {
			ticket.Done(breaker.Failure)
			return
		}
		r := c.round.Load()
		if r == nil {
			mine := &canaryRound{done: make(chan struct{})}
			if !c.round.CompareAndSwap(nil, mine) {
				continue // another 5xx started one: wait for it
			}
			go p.runCanary(snd, b, mine, rt.firstByte)
			r = mine
		}
		wait := time.NewTimer(min(canaryWait, rt.firstByte))
		select {
		case <-r.done:
			wait.Stop()
			ticket.Done(p.verdict(r.ok))
		case <-wait.C:
			r.leave(p, ticket)
		}
		return
	}
}

// runCanary asks b's canary for round r, records the verdict for
// canaryVerdictFor, and decides the tickets left to it.
func (p *Proxy) runCanary(snd sender, b *Backend, r *canaryRound, timeout time.Duration) {
	c := &b.canary
	r.ok = canaryAnswers(snd, b, timeout)
	until := p.now().Add(canaryVerdictFor).UnixNano()
	if r.ok {
		c.okUntil.Store(until)
	} else {
		c.badUntil.Store(until)
	}
	c.round.Store(nil)
	close(r.done)
	for e := r.pending.Swap(roundSealed); e != nil; e = e.next {
		for n := e.n.Swap(countSealed); n > 0; n-- {
			e.t.Done(p.verdict(r.ok))
		}
	}
	p.log.Debug().Str("backend", b.addr).Bool("healthy", r.ok).Msg("a 5xx answer judged by a canary request")
}

// leave counts ticket on r's pending list, for r to decide: in the entry
// of its equals when there is one, else in a new entry; when r has already
// sealed the list, the ticket is decided here.
func (r *canaryRound) leave(p *Proxy, ticket breaker.Ticket) {
	var mine *pendingTickets
	for {
		head := r.pending.Load()
		if head == roundSealed {
			ticket.Done(p.verdict(r.ok)) // r.ok was written before the seal
			return
		}
		for e := head; e != nil; e = e.next {
			// A sealed entry means the list was swapped out: the next
			// load finds roundSealed.
			if e.t == ticket && e.join() {
				return
			}
		}
		if mine == nil {
			mine = &pendingTickets{t: ticket}
			mine.n.Store(1)
		}
		mine.next = head
		if r.pending.CompareAndSwap(head, mine) {
			return
		}
	}
}

// verdict is the breaker outcome of a 5xx answer from a backend whose
// canary answered (ok) or failed.
func (p *Proxy) verdict(ok bool) breaker.Outcome {
	if ok {
		return p.excuse(excuseHealthy)
	}
	return breaker.Failure
}

// excuse counts a failure not counted against a breaker, for reason, and
// returns Ignore.
func (p *Proxy) excuse(reason excuseReason) breaker.Outcome {
	p.metrics.excused[reason].Inc()
	return breaker.Ignore
}

// canaryID starts the X-Request-Id of the canary's requests.
const canaryID = "probegate-canary-"

// canaryAnswers reports whether b answers a one-token completion of its
// model without a 5xx within timeout. The model is b's first /v1/models
// entry, asked once and remembered (asked again after a 404).
func canaryAnswers(snd sender, b *Backend, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	id := canaryID + strconv.FormatInt(time.Now().UnixNano(), 36)
	model := b.canary.model.Load()
	if model == nil {
		req.Header.SetMethod(fasthttp.MethodGet)
		req.Header.Set(hdrRequestID, id)
		req.SetRequestURI("/v1/models")
		if err := snd.Send(ctx, b.state, req, resp); err != nil || resp.StatusCode() != fasthttp.StatusOK {
			return false
		}
		var list struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		if json.Unmarshal(resp.Body(), &list) != nil || len(list.Data) == 0 || list.Data[0].ID == "" {
			return false
		}
		id := list.Data[0].ID
		model = &id
		b.canary.model.Store(model)
		req.Reset()
		resp.Reset()
	}
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI("/v1/completions")
	req.Header.SetContentType("application/json")
	name, _ := json.Marshal(*model) // a string always marshals
	body := append([]byte(`{"model":`), name...)
	req.SetBody(append(body, `,"prompt":"ping","max_tokens":1,"stream":false}`...))
	req.Header.Set(hdrRequestID, id)
	if err := snd.Send(ctx, b.state, req, resp); err != nil {
		return false
	}
	code := resp.StatusCode()
	if code == fasthttp.StatusNotFound {
		b.canary.model.Store(nil) // the backend serves another model now
	}
	return code < 500
}
