package vllmsim

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Server is one simulated vLLM pod: an HTTP server in front of an Engine that a
// goroutine steps in wall time. Its methods are safe for concurrent use.
//
// Lifecycle: NewServer, Start, then any number of Close / Restart pairs. Each Start
// or Restart runs a fresh "generation" (engine, metrics, listener) on the same
// address; Close kills the current one as a dying pod would: the listener closes,
// every open connection is reset (RST), every request in the engine is aborted, and
// Close returns once the package's goroutines for that generation have exited.
type Server struct {
	cfg    Config
	faults atomic.Pointer[Faults]
	// onArrival is SetOnArrival's callback; nil: none.
	onArrival atomic.Pointer[func(requestID string)]

	mu   sync.Mutex // serializes Start, Close, Restart; guards addr
	addr string
	gen  atomic.Pointer[generation]
	seq  int // generation counter, mixed into seeds
}

// NewServer returns a stopped server for cfg (defaults filled in); Start validates
// the configuration.
func NewServer(cfg Config) *Server {
	s := &Server{cfg: cfg.withDefaults()}
	f := cfg.Faults
	s.faults.Store(&f)
	return s
}

// Config returns the server's configuration with defaults filled in.
func (s *Server) Config() Config { return s.cfg }

// ErrRunning is returned by Start when the server already listens.
var ErrRunning = errors.New("vllmsim: server already running")

// Start listens on addr ("127.0.0.1:0" picks a free port) and serves.
func (s *Server) Start(addr string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g := s.gen.Load(); g != nil && !g.closed.Load() {
		return ErrRunning
	}
	return s.startLocked(addr)
}

func (s *Server) startLocked(addr string) error {
	if err := s.cfg.Validate(); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	s.seq++
	g, err := newGeneration(s, ln, s.seq)
	if err != nil {
		_ = ln.Close()
		return err
	}
	s.addr = ln.Addr().String()
	s.gen.Store(g)
	g.run()
	return nil
}

// Addr is the host:port the server listens (or last listened) on.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// URL is "http://" + Addr().
func (s *Server) URL() string { return "http://" + s.Addr() }

// Close kills the server (see Server). Closing a stopped server does nothing.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closeLocked()
}

func (s *Server) closeLocked() error {
	return s.killLocked(true)
}

// Crash kills the server as SIGKILL kills a process: like Close, except that
// the kernel closes each connection the usual way (FIN) instead of resetting
// it, as it does for sockets with no unread data. A peer that writes on such
// a connection later, as a proxy reusing a pooled keep-alive connection
// does, gets the request accepted by its own kernel and then an EOF or reset
// instead of the first response byte. Crashing a stopped server does
// nothing; Restart brings it back.
func (s *Server) Crash() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.killLocked(false)
}

func (s *Server) killLocked(reset bool) error {
	g := s.gen.Load()
	if g == nil || !g.closed.CompareAndSwap(false, true) {
		return nil
	}
	return g.shutdown(reset)
}

// Restart kills the server if it runs, then listens again on the same address with
// a fresh engine and fresh metrics: the pod comes back.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.addr == "" {
		return errors.New("vllmsim: Restart before Start")
	}
	_ = s.closeLocked()
	var err error
	for range 50 { // the port may linger a moment after a reset
		if err = s.startLocked(s.addr); err == nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return err
}

// State returns the true state of the server now: the snapshot published by the
// engine loop at its last step (or request arrival/abort) plus the current count of
// in-flight HTTP completion requests. It takes no lock.
func (s *Server) State() State {
	g := s.gen.Load()
	if g == nil {
		return State{}
	}
	st := *g.state.Load()
	st.ServerLoad = int(g.inflight.Load())
	return st
}

// generation is one life of a Server: engine, loop goroutine, HTTP server.
type generation struct {
	s      *Server
	cfg    Config
	origin time.Time
	closed atomic.Bool

	mu  sync.Mutex // guards eng
	eng *Engine

	wake      chan struct{} // cap 1: work arrived
	quit      chan struct{} // closed by shutdown
	loopDone  chan struct{}
	serveDone chan struct{}

	state    atomic.Pointer[State]
	history  atomic.Pointer[Stats] // Server.SetHistory: counters of an earlier life; nil: none
	inflight atomic.Int64          // completion requests in flight (ServerLoad)
	handlers atomic.Int64          // handler goroutines running

	httpSrv *http.Server
	ln      net.Listener
	connMu  sync.Mutex
	conns   map[net.Conn]struct{}

	rngMu sync.Mutex
	rng   *rand.Rand

	counters httpCounters
	metrics  metricsState
}

func newGeneration(s *Server, ln net.Listener, seq int) (*generation, error) {
	eng, err := NewEngine(s.cfg)
	if err != nil {
		return nil, err
	}
	g := &generation{
		s:         s,
		cfg:       s.cfg,
		origin:    time.Now(),
		eng:       eng,
		wake:      make(chan struct{}, 1),
		quit:      make(chan struct{}),
		loopDone:  make(chan struct{}),
		serveDone: make(chan struct{}),
		ln:        ln,
		conns:     make(map[net.Conn]struct{}),
		rng:       rand.New(rand.NewPCG(uint64(s.cfg.Seed), uint64(seq))),
	}
	g.metrics.init(g)
	g.publish()
	g.httpSrv = &http.Server{
		Handler:           g.handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       5 * time.Second, // uvicorn's keep-alive timeout
		ConnState:         g.connState,
		ErrorLog:          nil,
		BaseContext:       func(net.Listener) context.Context { return context.Background() },
	}
	return g, nil
}

func (g *generation) run() {
	go g.loop()
	go func() {
		defer close(g.serveDone)
		_ = g.httpSrv.Serve(g.ln)
	}()
}

func (g *generation) connState(c net.Conn, st http.ConnState) {
	g.connMu.Lock()
	defer g.connMu.Unlock()
	switch st {
	case http.StateNew:
		g.conns[c] = struct{}{}
	case http.StateClosed, http.StateHijacked:
		delete(g.conns, c)
	}
}

func (g *generation) shutdown(reset bool) error {
	g.connMu.Lock()
	for c := range g.conns {
		if tc, ok := c.(*net.TCPConn); ok && reset {
			_ = tc.SetLinger(0) // Close now sends RST, as a dying pod's kernel would
		}
	}
	g.connMu.Unlock()
	err := g.httpSrv.Close()
	close(g.quit) // after the resets: handlers released now must not end responses cleanly
	<-g.loopDone
	<-g.serveDone
	g.mu.Lock()
	for _, r := range append(append([]*Request(nil), g.eng.running...), g.eng.waiting...) {
		g.eng.Abort(r)
	}
	g.publish()
	g.mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for g.handlers.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// vnow maps wall time to the engine's virtual time.
func (g *generation) vnow() time.Duration {
	return time.Duration(float64(time.Since(g.origin)) / g.cfg.TimeScale)
}

// wallAt maps virtual time t to wall time.
func (g *generation) wallAt(t time.Duration) time.Time {
	return g.origin.Add(time.Duration(float64(t) * g.cfg.TimeScale))
}

// publish stores a fresh State snapshot; the caller holds g.mu.
func (g *generation) publish() {
	st := g.eng.State()
	g.state.Store(&st)
}

func (g *generation) kick() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// maxLag is how far (wall time) the engine loop may fall behind its schedule
// before it gives up catching up.
const maxLag = 50 * time.Millisecond

// loop runs engine steps in wall time: step (under g.mu), sleep until the step's
// end in wall time, hand the step's tokens to the handlers. With nothing to do it
// blocks until a request arrives.
func (g *generation) loop() {
	defer close(g.loopDone)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	idle := true
	for {
		g.mu.Lock()
		// Virtual time is the master while the engine is busy: wall deadlines follow
		// it, so timer overshoot is made up by shorter sleeps later. It jumps to wall
		// time after idleness, or when the loop lags by more than maxLag (CPU
		// starvation), instead of bursting steps to catch up.
		if idle || time.Since(g.wallAt(g.eng.Now())) > maxLag {
			g.eng.AdvanceTo(g.vnow())
		}
		g.eng.SetSlowdown(g.s.faults.Load().Slowdown)
		res := g.eng.Step()
		g.publish()
		end := g.wallAt(g.eng.Now())
		g.mu.Unlock()
		idle = res.Idle
		if res.Idle {
			select {
			case <-g.wake:
				continue
			case <-g.quit:
				return
			}
		}
		if d := time.Until(end); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-g.quit:
				return
			}
		}
		// res.Events is only reused by the next Step, which this goroutine runs.
		for i := range res.Events {
			deliver(&res.Events[i])
		}
	}
}

// Stats returns a copy of the current engine's cumulative counters and histograms
// (virtual seconds). It takes the engine lock briefly.
func (s *Server) Stats() Stats {
	g := s.gen.Load()
	if g == nil {
		return newStats()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.eng.Stats()
}
