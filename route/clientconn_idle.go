package route

import (
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"time"

	"github.com/valyala/fasthttp"
)

// clientIdleRelease is how long a keep-alive client connection may wait
// for its next request while fasthttp holds its buffers. After that the
// wait goes on without them: the connection leaves fasthttp, which returns
// its read buffer (server.max_header_bytes), write buffer and request
// context to their pools, and a small goroutine waits for the socket to be
// readable (as after an SSE stream, afterStream) and hands it back to the
// server. It is not a config key: a busy connection never waits this long,
// and an idle one then holds a few KiB instead of the read buffer
// (bench/results/2026-12-02-s12/cpu).
//
// Unlike fasthttp's ReduceMemoryUsage, which returns the buffers after
// every request and reads each request's first byte alone (one more read
// system call per request), a busy connection pays nothing: the release
// rides on the read deadline the idle wait arms anyway (armed lazily, so
// a busy connection updates its runtime timer about once per
// clientIdleRelease/4; a release comes 1 to 1.25 times clientIdleRelease
// into the wait).
const clientIdleRelease = time.Second

// connPhase is where a client connection is between fasthttp's calls,
// which is how clientConn tells the wait for a next request from a read
// inside one. fasthttp writes a response, then arms the idle deadline
// (SetReadDeadline) and reads the next request's first byte; once a byte
// arrived it arms the request's read deadline before any further read. So
// a read with exactly one non-zero SetReadDeadline since the last write is
// the idle wait; a read after two (a pipelined request's head already
// buffered), or after none (the body of a request with Expect:
// 100-continue) is not.
type connPhase uint8

const (
	phaseBusy  connPhase = iota // serving a request, or a new connection
	phaseWrote                  // a response was written
	phaseIdle                   // the idle deadline was armed after it: the next read waits for a request
)

// asked is the phase after SetReadDeadline(t). A zero t (deadlines
// cleared after a handler's own) changes nothing.
func (ph connPhase) asked(t time.Time) connPhase {
	switch {
	case t.IsZero():
		return ph
	case ph == phaseWrote:
		return phaseIdle
	}
	return phaseBusy
}

// readIdle is Read while the connection waits for its next request. The
// socket's read deadline is the release time, clientIdleRelease after the
// wait began, armed lazily with a quarter of it as slack (fasthttp asked
// for the idle deadline, now+clientIdleTimeout, just before: the wait's
// start is read from it, not from the clock). Bytes end the wait as any
// read does. When the release time passes first, the socket is detached
// and handed to Proxy.releaseIdle, and fasthttp is told the client closed
// (io.EOF before any byte of a request: it ends the connection without an
// answer and returns its buffers).
func (c *clientConn) readIdle(b []byte) (int, error) {
	begun := c.readWant.Add(-clientIdleTimeout)
	at := begun.Add(c.p.idleRelease)
	if a, ok := c.readBy.dueAt(at, c.p.idleRelease/4); ok {
		err := c.Conn.SetReadDeadline(a)
		c.readBy.armed(err, a)
		if err != nil {
			return 0, err
		}
	}
	n, err := c.raw.Read(b)
	if n > 0 {
		return n, err
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) || !time.Now().Before(c.readWant) {
		return n, err
	}
	// Released: nothing of a request was read, and fasthttp's Close of
	// this clientConn leaves the socket open (detached).
	c.detached.Store(true)
	go c.p.releaseIdle(c.Conn, c.readWant)
	return 0, io.EOF
}

// releaseIdle waits, holding no buffer, for the next request on a client
// connection released by readIdle, until its idle deadline (the one
// fasthttp armed, clientIdleTimeout after the last response), then serves
// it again on a fresh clientConn. Shutdown closes it while it waits
// (hijackRegistry.beginStop), as it does a connection idle after a stream.
func (p *Proxy) releaseIdle(raw net.Conn, deadline time.Time) {
	e := &hijackEntry{raw: raw}
	registered, keep := p.hijacks.parkIdle(e)
	if keep {
		keep = waitReadable(raw, time.Until(deadline))
	}
	if registered && !p.hijacks.drop(e) {
		keep = false // shutting down
	}
	if !keep {
		_ = raw.Close()
		return
	}
	c := p.wrapClient(raw, nil)
	p.trackConn(c, fasthttp.StateNew)
	_ = p.server.ServeConn(c) // closes c and reports StateClosed when done
}

// parkIdle registers e, an idle connection released by readIdle, as
// parked, so that beginStop closes it while it waits; the caller drops it
// (drop) once the wait ended. It reports whether e was registered, and
// whether the connection may wait (keep): false when the proxy is
// shutting down, and the caller must close the connection. The pairing
// that makes beginStop miss no parked connection is park's (see
// hijackRegistry): parkIdle stores e in its slot, then loads stopping;
// beginStop stores stopping, then loads every slot.
func (r *hijackRegistry) parkIdle(e *hijackEntry) (registered, keep bool) {
	if r.stopping.Load() {
		return false, false
	}
	e.phase.Store(hijackParked)
	e.shard = rand.Uint32N(regShards)
	e.idx = r.shards[e.shard].take()
	r.slot(e).Store(e)
	return true, !r.stopping.Load()
}
