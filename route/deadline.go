package route

import (
	"sync/atomic"
	"time"
)

// lazyDeadline remembers the deadline armed on one direction of a
// connection so that it is re-armed only when it must be. Asked for a
// deadline d from now, it accepts the armed one if it lies between now+d
// and now+d+d/16, and otherwise arms now+d+d/16: a wait is cut after
// between d and d + d/16 (never sooner), and a connection that keeps
// reading or writing updates its runtime timer about once per d/16 instead
// of on every call (under wrk, re-arming on every call cost ~8% of the
// proxy's CPU). Safe for concurrent use, though a connection direction is
// used by one goroutine at a time.
type lazyDeadline struct {
	until atomic.Int64 // armed deadline in Unix nanoseconds; 0: none
}

// due reports whether a wait of d starting at now needs a new deadline,
// and which one to arm.
func (l *lazyDeadline) due(now time.Time, d time.Duration) (time.Time, bool) {
	return l.dueAt(now.Add(d), d/16)
}

// dueAt reports whether a wait that must not be cut before t needs a new
// deadline, and which one to arm: the armed one is kept if it lies between
// t and t+slack, else t+slack is armed.
func (l *lazyDeadline) dueAt(t time.Time, slack time.Duration) (time.Time, bool) {
	want := t.UnixNano()
	if u := l.until.Load(); u >= want && u <= want+int64(slack) {
		return time.Time{}, false
	}
	return t.Add(slack), true
}

// forget drops what was armed (the socket under the connection changed,
// or no deadline is armed): the next due arms again.
func (l *lazyDeadline) forget() { l.until.Store(0) }

// armed records the outcome of arming t; after an error the next call
// tries again.
func (l *lazyDeadline) armed(err error, t time.Time) {
	if err != nil {
		l.until.Store(0)
		return
	}
	l.until.Store(t.UnixNano())
}
