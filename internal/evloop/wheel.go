package evloop

// timer is one deadline, embedded in what it times. Moving a deadline
// later is a field store: the wheel finds the new deadline when the old
// slot comes up and queues the entry again (a lazy wheel). Only a deadline
// earlier than its queued slot queues a new entry; the old one is then
// stale (its seq no longer matches) and skipped.
type timer struct {
	when   int64  // deadline on the loop's clock; 0: disarmed
	queued int64  // tick index of the slot holding the live entry; 0: none
	seq    uint32 // the live entry's sequence number
}

type timed interface{ timerOf() *timer }

type wheelEntry[T timed] struct {
	v   T
	seq uint32
}

// wheel is a hashed timing wheel of tick-sized slots over a clock in
// nanoseconds. It is owned by one loop: not safe for concurrent use. A
// deadline fires at the first advance at or after it (so up to one tick
// late), never before it.
type wheel[T timed] struct {
	tick  int64
	cur   int64 // last tick index processed
	slots [][]wheelEntry[T]
	spare []wheelEntry[T]
}

func newWheel[T timed](tick int64, slots int, now int64) *wheel[T] {
	return &wheel[T]{tick: tick, cur: now / tick, slots: make([][]wheelEntry[T], slots)}
}

// arm sets v's deadline to when (> 0).
func (w *wheel[T]) arm(v T, when int64) {
	t := v.timerOf()
	t.when = when
	idx := when / w.tick
	if idx <= w.cur {
		idx = w.cur + 1
	}
	if t.queued != 0 && t.queued <= idx {
		return // an entry comes up no later than the deadline
	}
	t.seq++
	t.queued = idx
	s := &w.slots[idx%int64(len(w.slots))]
	*s = append(*s, wheelEntry[T]{v, t.seq})
}

// disarm cancels v's deadline (the entry, if any, is dropped lazily).
func (w *wheel[T]) disarm(v T) { v.timerOf().when = 0 }

// advance fires, in no particular order, every deadline at or before now.
// fire may arm or disarm timers, its own included.
func (w *wheel[T]) advance(now int64, fire func(T)) {
	target := now / w.tick
	if target <= w.cur {
		return
	}
	if target-w.cur >= int64(len(w.slots)) {
		// The clock jumped a whole turn: every entry is due or re-queued.
		all := w.spare[:0]
		for i := range w.slots {
			all = append(all, w.slots[i]...)
			w.slots[i] = w.slots[i][:0]
		}
		w.cur = target
		w.run(all, now, fire)
		w.spare = all[:0]
		return
	}
	for w.cur < target {
		w.cur++
		i := w.cur % int64(len(w.slots))
		due := w.slots[i]
		if len(due) == 0 {
			continue
		}
		w.slots[i] = w.spare[:0]
		w.run(due, now, fire)
		w.spare = due[:0]
	}
}

func (w *wheel[T]) run(due []wheelEntry[T], now int64, fire func(T)) {
	for k, e := range due {
		due[k] = wheelEntry[T]{} // no reference kept in the spare slice
		t := e.v.timerOf()
		if e.seq != t.seq || t.queued == 0 {
			continue // stale: a newer entry is queued
		}
		t.queued = 0
		switch {
		case t.when == 0:
		case t.when > now:
			w.arm(e.v, t.when)
		default:
			t.when = 0
			fire(e.v)
		}
	}
}
