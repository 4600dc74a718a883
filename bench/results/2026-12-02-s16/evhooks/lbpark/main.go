// Command lbpark is session 16's measurement driver for evloop's park and
// resume (issue 12): session 15's lbproxy (a least-in-flight proxy on
// internal/evloop over fixed upstreams) with every request's decision
// deferred the way route's probe policy would defer it: Route parks the
// request and hands its ticket to a goroutine, which picks and calls
// Server.Resume; Resumed sends the request where the goroutine picked. The
// pick itself is least-in-flight (no network I/O), so the figure is the
// cost of the park, the hand-off and the resume alone.
//
// Usage: lbpark -listen 127.0.0.1:18592 -upstreams 127.0.0.1:18501,127.0.0.1:18502 -loops 2 -workers 2
package main

import (
	"flag"
	"log"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/probegate/probegate/internal/evloop"
)

// pending is one parked request: the goroutine's pick, read in Resumed.
type pending struct {
	t    evloop.Ticket
	pick netip.AddrPort
	slot *atomic.Int64
}

type parker struct {
	srv   atomic.Pointer[evloop.Server]
	ups   []netip.AddrPort
	load  []atomic.Int64
	work  chan *pending
	pool  sync.Pool
	order atomic.Uint32
}

// Route parks every request; a worker decides it.
func (p *parker) Route(r *evloop.Request, d *evloop.Decision) {
	w := p.pool.Get().(*pending)
	w.t = r.Ticket()
	d.Park, d.ParkTimeout, d.Tag = true, 10*time.Second, w
	p.work <- w
}

// decide is a worker: least in flight, ties rotated, then Resume.
func (p *parker) decide() {
	for w := range p.work {
		first := int(p.order.Add(1))
		best := first % len(p.ups)
		for k := 1; k < len(p.ups); k++ {
			if i := (first + k) % len(p.ups); p.load[i].Load() < p.load[best].Load() {
				best = i
			}
		}
		p.load[best].Add(1)
		w.pick, w.slot = p.ups[best], &p.load[best]
		p.srv.Load().Resume(w.t)
	}
}

func (p *parker) Resumed(r *evloop.Request, d *evloop.Decision) {
	w := r.Tag().(*pending)
	d.Upstream, d.Tag = w.pick, w
	d.Scratch = r.Remote.Addr().AppendTo(d.Scratch)
	d.Set = append(d.Set, evloop.Header{Name: "X-Forwarded-For", Value: d.Scratch})
}

func (p *parker) Done(_ *evloop.Request, res *evloop.Result, _ *evloop.Decision) bool {
	w := res.Tag.(*pending)
	if w.slot != nil {
		w.slot.Add(-1)
	}
	*w = pending{}
	p.pool.Put(w)
	return false
}

func main() {
	listen := flag.String("listen", "127.0.0.1:18592", "address to serve")
	ups := flag.String("upstreams", "127.0.0.1:18501,127.0.0.1:18502", "comma-separated upstream addresses")
	loops := flag.Int("loops", 2, "event loops; GOMAXPROCS is set to loops+1")
	workers := flag.Int("workers", 2, "goroutines that decide parked requests")
	flag.Parse()
	runtime.GOMAXPROCS(*loops + 1)
	p := &parker{work: make(chan *pending, 4096)}
	p.pool.New = func() any { return new(pending) }
	for _, a := range strings.Split(*ups, ",") {
		ap, err := netip.ParseAddrPort(a)
		if err != nil {
			log.Fatal(err)
		}
		p.ups = append(p.ups, ap)
	}
	p.load = make([]atomic.Int64, len(p.ups))
	closing := []byte("HTTP/1.1 503 X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
	s, err := evloop.New(evloop.Config{
		Addr: *listen, Loops: *loops, Handler: p,
		Fallback:      func(c net.Conn) { c.Close() },
		ErrorResponse: func(int) []byte { return closing },
		MaxHeadBytes:  16 << 10, MaxHeaders: 100, MaxBodyBytes: 16 << 20, MaxIdlePerUpstream: 256,
		ReadTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second, FirstByteTimeout: 60 * time.Second,
		ReadIdleTimeout: 60 * time.Second, IdleConnTTL: 4 * time.Second,
	})
	if err != nil {
		log.Fatal(err)
	}
	p.srv.Store(s)
	for range *workers {
		go p.decide()
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	s.Close()
	close(p.work)
}
