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
	evProbeLand                 // a replica's probe lands (answer or deadline): a replica, b flight
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

// before is the queue's order: by time, then by scheduling order.
func (e *event) before(o *event) bool {
	if e.at != o.at {
		return e.at < o.at
	}
	return e.seq < o.seq
}

// Lanes of the event queue (see pushLane).
const (
	laneScrapeDeliver = iota // scrape answers: always now + RTT + render
	laneScrapeIssue          // next scrapes: now + interval (constant unless adaptive)
	numLanes
)

// eventQueue holds the scheduled events and pops them in (at, seq) order,
// which makes the simulation deterministic: equal times fire in scheduling
// order. Most events are the scrape loops' (at N=1,024 and R=32, 32,768
// loops): they are scheduled a constant delay after the current time, so
// they arrive in time order and wait in FIFO lanes (ring buffers, O(1));
// the rest, and any lane event scheduled out of time order, go to a binary
// min-heap. pop takes the least of the heap's top and the lanes' heads,
// so the order is exactly that of a single heap. It stores values, not
// pointers, so scheduling allocates nothing once warm.
type eventQueue struct {
	h     []event
	seq   uint64
	lanes [numLanes]lane
}

// lane is a FIFO of events in (at, seq) order: a ring buffer whose length
// is a power of two.
type lane struct {
	buf        []event
	head, size int
}

func (l *lane) tail() *event { return &l.buf[(l.head+l.size-1)&(len(l.buf)-1)] }

func (l *lane) add(e event) {
	if l.size == len(l.buf) {
		nb := make([]event, max(2*len(l.buf), 1024))
		for i := range l.size {
			nb[i] = l.buf[(l.head+i)&(len(l.buf)-1)]
		}
		l.buf, l.head = nb, 0
	}
	l.buf[(l.head+l.size)&(len(l.buf)-1)] = e
	l.size++
}

func (l *lane) take() event {
	e := l.buf[l.head]
	l.head = (l.head + 1) & (len(l.buf) - 1)
	l.size--
	return e
}

func (q *eventQueue) len() int {
	n := len(q.h)
	for i := range q.lanes {
		n += q.lanes[i].size
	}
	return n
}

func (q *eventQueue) less(i, j int) bool { return q.h[i].before(&q.h[j]) }

// push schedules e (its seq is assigned here).
func (q *eventQueue) push(e event) {
	q.seq++
	e.seq = q.seq
	q.heapPush(e)
}

// pushLane schedules e in lane l when it is not earlier than the lane's
// last event (the lane stays in order), else in the heap.
func (q *eventQueue) pushLane(l int, e event) {
	q.seq++
	e.seq = q.seq
	ln := &q.lanes[l]
	if ln.size > 0 && e.at < ln.tail().at {
		q.heapPush(e)
		return
	}
	ln.add(e)
}

func (q *eventQueue) heapPush(e event) {
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
	var best *event
	from := -1 // the heap
	if len(q.h) > 0 {
		best = &q.h[0]
	}
	for i := range q.lanes {
		if l := &q.lanes[i]; l.size > 0 {
			if h := &l.buf[l.head]; best == nil || h.before(best) {
				best, from = h, i
			}
		}
	}
	if from >= 0 {
		return q.lanes[from].take()
	}
	return q.heapPop()
}

func (q *eventQueue) heapPop() event {
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
