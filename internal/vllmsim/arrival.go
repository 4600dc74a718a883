package vllmsim

// SetOnArrival makes the server call f with a completion request's
// X-Request-Id header ("" when it has none) right after the request joined
// the engine's queue, on the request's handler goroutine, before the first
// response byte and before the engine steps again (State then counts the
// request): a benchmark's per-request record of where each request went
// and what the fleet looked like then. nil (the default) turns it off. f
// runs under the engine's lock: it must not block (the request and the
// engine wait for it) nor call this Server's Stats, Close, Crash or
// Restart. It holds across restarts.
func (s *Server) SetOnArrival(f func(requestID string)) {
	if f == nil {
		s.onArrival.Store(nil)
		return
	}
	s.onArrival.Store(&f)
}
