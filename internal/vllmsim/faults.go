package vllmsim

import "time"

// Faults describes injected misbehaviour of a Server. The zero value injects nothing.
// A Server's faults can be replaced at any time with SetFaults; handlers and the
// engine loop read the current value on each use.
type Faults struct {
	// ProbeDelay delays every answer of /metrics and /load by this duration
	// (wall time, not scaled).
	ProbeDelay time.Duration
	// ProbeHang makes /metrics and /load never answer: the handler blocks until the
	// client goes away or the server closes.
	ProbeHang bool
	// FailRate is the share (0..1) of completion requests answered with a 500 in
	// vLLM's error envelope instead of being served.
	FailRate float64
	// Slowdown multiplies the duration of every engine step (values <= 1 mean none;
	// 2 = steps take twice as long). Virtual time and wall time both stretch.
	Slowdown float64
	// MetricsInterval makes the /metrics gauges lag: they are refreshed from the true
	// state at most once per interval (wall time); 0 refreshes on every scrape.
	MetricsInterval time.Duration
	// Hang makes completion requests be accepted (read) and never answered, until
	// the client goes away or the server closes. Such requests count in /load.
	Hang bool
}

// SetFaults replaces the server's injected faults. It is safe for concurrent use
// and takes effect for requests and steps that start after it returns.
func (s *Server) SetFaults(f Faults) {
	s.faults.Store(&f)
}

// Faults returns the server's current injected faults. Safe for concurrent use.
func (s *Server) Faults() Faults {
	return *s.faults.Load()
}
