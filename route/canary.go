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

// A 5xx answer is judged by a canary, not taken on the client's word.
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
// The judgement is made before the 5xx answer goes to the client, so the
// breaker has counted it when the client has it: the 5xx that starts a
// canary, and those that arrive while it runs, wait for its verdict (one
// short completion on a working pod, at most first_byte_timeout). Nothing
// of this is on the path of a request that is not answered 5xx; it takes
// no lock (a round is claimed by compare-and-swap).
type canary struct {
	okUntil  atomic.Int64 // p.now() Unix ns until which the backend passed its last canary
	badUntil atomic.Int64 // ... failed it
	model    atomic.Pointer[string]
	round    atomic.Pointer[canaryRound] // the canary under way, nil when none
}

// canaryRound is one canary: ok is its verdict, valid once done is closed.
type canaryRound struct {
	done chan struct{}
	ok   bool
}

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

// judgeServerError returns the breaker outcome of a 5xx answer from b:
// Ignore when b answers a canary (a fresh verdict's, or the one this call
// runs or waits for), else Failure.
func (p *Proxy) judgeServerError(rt *settings, b *Backend) breaker.Outcome {
	snd, ok := p.fetcher.(sender)
	if !ok {
		return breaker.Failure
	}
	c := &b.canary
	for {
		now := p.now().UnixNano()
		if now < c.okUntil.Load() {
			return p.excuse(excuseHealthy)
		}
		if now < c.badUntil.Load() {
			return breaker.Failure
		}
		r := c.round.Load()
		if r == nil {
			mine := &canaryRound{done: make(chan struct{})}
			if !c.round.CompareAndSwap(nil, mine) {
				continue // another 5xx started one: wait for it
			}
			mine.ok = canaryAnswers(snd, b, rt.firstByte)
			until := p.now().Add(canaryVerdictFor).UnixNano()
			if mine.ok {
				c.okUntil.Store(until)
			} else {
				c.badUntil.Store(until)
			}
			c.round.Store(nil)
			close(mine.done)
			p.log.Debug().Str("backend", b.addr).Bool("healthy", mine.ok).Msg("a 5xx answer judged by a canary request")
			r = mine
		}
		<-r.done
		if r.ok {
			return p.excuse(excuseHealthy)
		}
		return breaker.Failure
	}
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
