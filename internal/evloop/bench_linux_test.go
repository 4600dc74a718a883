//go:build linux

package evloop

import (
	"bytes"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"
)

// rawUpstream answers every request on a connection with a fixed
// Content-Length response, parsing only the framing: allocation-free
// after its buffers, so a benchmark's allocs/op are the loop's.
func rawUpstream(b *testing.B) netip.AddrPort {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 16\r\n\r\n{\"choices\":[{}]}")
	done := make(chan struct{})
	var conns []net.Conn
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			go func() {
				buf := make([]byte, 0, 64<<10)
				var r Request
				lim := &limits{head: 64 << 10, headers: 100, body: 1 << 20}
				for {
					n, err := c.Read(buf[len(buf):cap(buf)])
					if err != nil {
						return
					}
					buf = buf[:len(buf)+n]
					for {
						end := bytes.Index(buf, crlfcrlf)
						if end < 0 {
							break
						}
						if o, _ := parseRequest(buf, lim, &r); o != parseOK || len(buf) < r.total {
							break
						}
						if _, err := c.Write(resp); err != nil {
							return
						}
						buf = buf[:copy(buf, buf[r.total:])]
					}
				}
			}()
		}
	}()
	b.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return addrOf(nil, ln.Addr())
}

// benchHandler routes to one upstream with an X-Forwarded-For edit and
// does nothing in Done, as a caller's accounting would (no allocation).
type benchHandler struct{ up netip.AddrPort }

func (h *benchHandler) Route(r *Request, d *Decision) {
	d.Upstream = h.up
	d.Scratch = r.Remote.Addr().AppendTo(d.Scratch)
	d.Set = append(d.Set, Header{Name: "X-Forwarded-For", Value: d.Scratch})
}

func (h *benchHandler) Done(*Request, *Result, *Decision) bool { return false }

// BenchmarkExchange is the loop's per-request path end to end on one
// keep-alive client connection: parse, route, rewrite the head, one write
// upstream, parse the response head, relay, account. ns/op includes the
// client's and the upstream's system calls; allocs/op is the whole
// process's (target 0 in steady state).
func BenchmarkExchange(b *testing.B) {
	h := &benchHandler{up: rawUpstream(b)}
	_, roundTrip := benchLoop(b, h)
	for range 100 {
		roundTrip() // buffers and the upstream connection in place
	}
	b.ReportAllocs()
	for b.Loop() {
		roundTrip()
	}
}

// parkHandler parks every request and resumes it from another goroutine
// (the probe policy's shape: Route hands the pick to a goroutine, which
// calls Server.Resume), then routes it as benchHandler does.
type parkHandler struct {
	benchHandler
	tickets chan Ticket
}

func (h *parkHandler) Route(r *Request, d *Decision) {
	d.Park, d.ParkTimeout, d.Tag = true, time.Minute, h
	h.tickets <- r.Ticket()
}

func (h *parkHandler) Resumed(r *Request, d *Decision) {
	if r.Tag() != h {
		panic("evloop: Resumed without the parking decision's Tag")
	}
	h.benchHandler.Route(r, d)
}

// BenchmarkParkResume is BenchmarkExchange with each request parked in
// Route and resumed from another goroutine (a channel hand-off, then
// Server.Resume: the loop's queue and eventfd wake-up, then Resumed):
// ns/op beside BenchmarkExchange's is the round trip through the other
// goroutine; allocs/op is the whole process's (target 0).
func BenchmarkParkResume(b *testing.B) {
	h := &parkHandler{benchHandler: benchHandler{up: rawUpstream(b)}, tickets: make(chan Ticket, 64)}
	s, roundTrip := benchLoop(b, h)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for t := range h.tickets {
			s.Resume(t)
		}
	}()
	defer func() { close(h.tickets); <-done }()
	for range 100 {
		roundTrip()
	}
	b.ReportAllocs()
	for b.Loop() {
		roundTrip()
	}
}

// benchLoop starts a one-loop server with h and returns it and a
// round trip of one small POST on one keep-alive client connection.
func benchLoop(b *testing.B, h Handler) (*Server, func()) {
	s, err := New(Config{
		Addr: "127.0.0.1:0", Loops: 1, Handler: h,
		Fallback:      func(c net.Conn) { c.Close() },
		ErrorResponse: envelopeResponse,
		MaxHeadBytes:  16 << 10, MaxHeaders: 100, MaxBodyBytes: 1 << 20, MaxIdlePerUpstream: 64,
		ReadTimeout: time.Minute, IdleTimeout: time.Minute, FirstByteTimeout: time.Minute,
		ReadIdleTimeout: time.Minute, IdleConnTTL: time.Minute,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	req := []byte(post("/v1/completions", `{"model":"m","prompt":"hello","max_tokens":8}`))
	buf := make([]byte, 4096)
	roundTrip := func() {
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		got := 0
		for {
			n, err := c.Read(buf[got:])
			if err != nil && err != io.EOF {
				b.Fatal(err)
			}
			got += n
			if i := bytes.Index(buf[:got], crlfcrlf); i >= 0 && got >= i+4+16 {
				return
			}
			if n == 0 {
				b.Fatal("closed")
			}
		}
	}
	return s, roundTrip
}
