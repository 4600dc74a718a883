package probe

// A backend's batch seats as its reports show them: vLLM runs at most
// max_num_seqs requests at once (fewer when its KV cache is full) and queues
// the rest as waiting, and it exports neither limit as a metric. The largest
// running count any report has shown is the seat limit the router assumes
// (0 until a report has shown a request running). It only grows: a pod that
// ran 4 requests at once has at least 4 seats, and a later report with fewer
// running is a pod with seats free, or a KV cache that ran out first (long
// prompts), which frees as they finish.

// nextSeatLimit returns the seat limit after a report l.
func nextSeatLimit(limit int32, l *Load) int32 {
	if l.Running > int(limit) { // a report without a running count says -1
		return int32(min(l.Running, 1<<30))
	}
	return limit
}

// SeatLimit returns the largest running count any report has shown (see
// nextSeatLimit), 0 before any. Lock-free.
func (s *State) SeatLimit() int {
	if r := s.latest.Load(); r != nil {
		return int(r.seatLimit)
	}
	return 0
}
