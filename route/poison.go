package route

import (
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
)

// A request that a backend drops (its connection closed or reset after
// the request went out, before any byte of the answer reached the
// client: retry reasons reset and after_head) is re-sent on another
// backend under upstream.retry_on_reset, because that is what a pod
// restart, crash, OOM kill or drain does to the requests it held. But a
// request can be what crashed the pod (an input that makes the server
// process die), and then every re-send crashes one more pod. So:
//
//   - a request is re-sent after being dropped at most once, whatever
//     upstream.retries allows (re-picks after a refused dial or an open
//     breaker, which sent nothing, are not limited): one request crashes
//     at most two pods;
//   - a request dropped by two backends in a row is remembered by its
//     body (poisonTable) for poisonMemory, and a request with the same
//     body is not re-sent after being dropped: a client, or its SDK's
//     automatic retries, re-sending it crashes at most one pod each time.
//     Such requests are counted in probegate_poison_requests_total and
//     logged (warn) with their request id.
//
// A write that failed is no drop: the request never reached the backend
// whole, so it cannot be what crashed it. That is what a pooled keep-alive
// connection the backend reset while it sat idle does (a pod restarted or
// killed with unread data, a node gone, an expired NAT entry): the check
// before the reuse (upstreamguard.go) reads the reset and the write fails
// at once. Such an attempt costs nothing, so, like a breaker refusal, it
// spends no retry either (handler.go): with every pod's pool reset at
// once, the request still reaches a fresh connection.
//
// Nor is a reset on a reused connection whose peer's TCP had not
// acknowledged the request (Linux: TCP_INFO, read only on that failure;
// errUndelivered): the backend's end was closed, or closing, as the
// request arrived, and its kernel answered the request with a reset. A
// process that took the request and died closes with a FIN that carries
// the acknowledgement, so its drop counts. Such an attempt did cost a
// round trip, and a server that resets right after reading cannot be told
// from one that never read, so it spends a retry: upstream.retries bounds
// those re-sends. Elsewhere (other systems, or a socket whose counters
// cannot be read) every close after the write counts, pooled or fresh.
//
// The client gets the 502 envelope, as when no retry is left.

// poisonMemory is how long a body dropped by two backends in a row is not
// re-sent after a drop. Not a config key: a legitimate body caught in two
// pods' restarts loses only its re-send for this long.
const poisonMemory = 10 * time.Minute

// poisonSlots is the number of bodies remembered (the most recent ones).
const poisonSlots = 256

// poisonTable remembers the bodies of requests that two backends dropped
// in a row, by their 64-bit hash, lock-free: add overwrites the oldest
// slot. A slot's hash and time are two atomics; a reader racing a writer
// may pair one slot's hash with the other's time, which at worst
// misjudges one body's age once.
type poisonTable struct {
	next  atomic.Uint32
	slots [poisonSlots]struct {
		hash atomic.Uint64
		at   atomic.Int64 // Unix ns; 0: empty
	}
}

// add remembers body as dropped twice at now.
func (t *poisonTable) add(body []byte, now time.Time) {
	i := (t.next.Add(1) - 1) % poisonSlots
	s := &t.slots[i]
	s.at.Store(0)
	s.hash.Store(xxhash.Sum64(body))
	s.at.Store(now.UnixNano())
}

// has reports whether body was dropped twice within poisonMemory of now.
func (t *poisonTable) has(body []byte, now time.Time) bool {
	h := xxhash.Sum64(body)
	since := now.Add(-poisonMemory).UnixNano()
	for i := range t.slots {
		s := &t.slots[i]
		if s.hash.Load() == h {
			if at := s.at.Load(); at != 0 && at > since {
				return true
			}
		}
	}
	return false
}

// dropped reports whether r is a retry reason for a request a backend
// dropped after it went out (rather than one never sent).
func (r retryReason) dropped() bool {
	return r == retryReset || r == retryStale || r == retryAfterHead
}

// poisoned records that the request's body was dropped twice in a row, by
// the last two of tried (the same backend twice when it was the only one
// left to try again on a fresh connection after a stale one).
func (p *Proxy) poisoned(rc *reqCtx, body []byte, tried []*Backend) {
	p.poison.add(body, p.now())
	p.metrics.poison.Inc()
	ev := p.log.Warn().Str("request_id", string(rc.id))
	if n := len(tried); n >= 2 {
		ev = ev.Str("backend", tried[n-1].addr).Str("previous_backend", tried[n-2].addr)
	}
	ev.Dur("remembered_for", poisonMemory).Msg("request dropped twice in a row: not re-sent, nor its body after a drop while remembered (a request that crashes pods?)")
}
