package probe

// A backend's batch seats as its reports show them: vLLM runs at most
// max_num_seqs requests at once (fewer when its KV cache is full) and queues
// the rest as waiting, and it exports neither limit as a metric. A report
// that shows requests waiting shows the pod full, so its running count is
// the number of seats it had then; the largest such count seen so far is
// the seat limit the router assumes (0 until a report has shown the pod
// full). It only grows: a pod that ran 4 requests with others waiting has
// at least 4 seats, and a later full report with fewer running is a KV
// cache that ran out first (long prompts), which frees as they finish.

// nextSeatLimit returns the seat limit after a report l.
func nextSeatLimit(limit int32, l *Load) int32 {
	if l.Running > 0 && int64(l.Running) > int64(limit) {
		return int32(min(l.Running, 1<<30))
	}
	return limit
}

// SeatLimit returns the largest running count of a report that also showed
// requests waiting (see nextSeatLimit), 0 before any. Lock-free.
func (s *State) SeatLimit() int {
	if r := s.latest.Load(); r != nil {
		return int(r.seatLimit)
	}
	return 0
}
