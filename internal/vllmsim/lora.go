package vllmsim

import "sort"

// loraSlots models vLLM's LoRA handling: at most max distinct adapters may have
// requests in the running batch (the scheduler skips a waiting request whose adapter
// would exceed that), and at most max adapters are loaded on the GPU, evicted LRU
// among those with no running request. Activating an adapter that is not loaded
// counts a load and costs Config.LoRALoadDelay in the step that admits it.
//
// Not safe for concurrent use; the Engine owns it.
type loraSlots struct {
	max     int
	loaded  []string // LRU order, most recently used last
	running map[string]int
	waiting map[string]int
	loads   int64
	dirty   bool // running/waiting/loaded name sets changed since last names()
}

func newLoRASlots(max int) *loraSlots {
	return &loraSlots{max: max, running: map[string]int{}, waiting: map[string]int{}}
}

// canRun reports whether a request for adapter a may join the running batch now.
func (l *loraSlots) canRun(a string) bool {
	return l.running[a] > 0 || len(l.running) < l.max
}

// start moves one request of adapter a into the running batch and reports whether
// that required loading a onto the GPU.
func (l *loraSlots) start(a string) (loaded bool) {
	if l.running[a] == 0 {
		l.dirty = true
	}
	l.running[a]++
	for i, n := range l.loaded {
		if n == a {
			copy(l.loaded[i:], l.loaded[i+1:])
			l.loaded[len(l.loaded)-1] = a
			return false
		}
	}
	if len(l.loaded) >= l.max {
		for i, n := range l.loaded {
			if l.running[n] == 0 {
				l.loaded = append(l.loaded[:i], l.loaded[i+1:]...)
				break
			}
		}
	}
	l.loaded = append(l.loaded, a)
	l.loads++
	l.dirty = true
	return true
}

// stop removes one running request of adapter a (finished, aborted or preempted).
func (l *loraSlots) stop(a string) {
	if l.running[a]--; l.running[a] <= 0 {
		delete(l.running, a)
		l.dirty = true
	}
}

func (l *loraSlots) enqueue(a string) {
	if l.waiting[a] == 0 {
		l.dirty = true
	}
	l.waiting[a]++
}

func (l *loraSlots) dequeue(a string) {
	if l.waiting[a]--; l.waiting[a] <= 0 {
		delete(l.waiting, a)
		l.dirty = true
	}
}

func sortedKeys(m map[string]int) []string {
	if len(m) == 0 {
		return nil
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// names returns the loaded, running and waiting adapter names (sorted, except
// loaded which is in LRU order).
func (l *loraSlots) names() (loaded, running, waiting []string) {
	l.dirty = false
	if len(l.loaded) > 0 {
		loaded = append([]string(nil), l.loaded...)
	}
	return loaded, sortedKeys(l.running), sortedKeys(l.waiting)
}
