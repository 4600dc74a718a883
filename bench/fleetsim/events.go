package fleetsim

import "time"

// kind is what an event does when it fires.
type kind uint8

const (
	evArrival       kind = iota // the next request reaches its replica
	evPodArrive                 // a forwarded request reaches its pod
	evStepEnd                   // a pod's engine step ends: its tokens are out
	evProxyFirst                // a request's first frame passes its replica
	evProxyFinish               // a request's last frame passes its replica
	evScrapeIssue               // a replica's scrape loop fires for one pod
	evScrapeDeliver             // that scrape's answer reaches the replica
	evWindow                    // a herd-index window closes
)

// event is one scheduled happening. a and b are indices whose meaning
// depends on kind (replica, pod, request).
type event struct {
	at   time.Duration
	seq  uint64 // insertion order: ties fire first-in, first-out
	kind kind
	a, b int32
	req  *request
}

// eventQueue is a binary min-heap of events ordered by (at, seq), which makes
// the simulation deterministic: equal times fire in scheduling order. It
// stores values, not pointers, so scheduling allocates nothing once warm.
type eventQueue struct {
	h   []event
	seq uint64
}

func (q *eventQueue) len() int { return len(q.h) }

func (q *eventQueue) less(i, j int) bool {
	if q.h[i].at != q.h[j].at {
		return q.h[i].at < q.h[j].at
	}
	return q.h[i].seq < q.h[j].seq
}

// push schedules e (its seq is assigned here).
func (q *eventQueue) push(e event) {
	q.seq++
	e.seq = q.seq
	q.h = append(q.h, e)
	i := len(q.h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q.h[i], q.h[p] = q.h[p], q.h[i]
		i = p
	}
}

// pop removes and returns the earliest event. The queue must not be empty.
func (q *eventQueue) pop() event {
	top := q.h[0]
	n := len(q.h) - 1
	q.h[0] = q.h[n]
	q.h = q.h[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && q.less(r, l) {
			m = r
		}
		if !q.less(m, i) {
			break
		}
		q.h[i], q.h[m] = q.h[m], q.h[i]
		i = m
	}
	return top
}
