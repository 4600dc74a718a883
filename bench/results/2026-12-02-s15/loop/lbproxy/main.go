// Command lbproxy is session 15's measurement driver for internal/evloop
// (issue 12): the package used as a least-in-flight HTTP/1.1 proxy over
// fixed upstreams, with nothing of route's (no allowlist, extraction,
// breaker, metrics or logs). It is not probegate; it shows what the loop
// itself costs beside nginx. See the README one folder up.
//
// Usage: lbproxy -listen 127.0.0.1:18290 -upstreams 127.0.0.1:18201,127.0.0.1:18202 -loops 2
package main

import (
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/probegate/probegate/internal/evloop"
)

// backend is one upstream and its in-flight count across loops.
type backend struct {
	addr     netip.AddrPort
	inflight atomic.Int64
}

// leastInflight picks the backend with the fewest requests in flight,
// ties rotated; Done gives the slot back.
type leastInflight struct {
	bes []*backend
	rr  atomic.Uint32
}

func (h *leastInflight) Route(r *evloop.Request, d *evloop.Decision) {
	n := len(h.bes)
	start := int(h.rr.Add(1))
	var best *backend
	for k := range n {
		b := h.bes[(start+k)%n]
		if best == nil || b.inflight.Load() < best.inflight.Load() {
			best = b
		}
	}
	best.inflight.Add(1)
	d.Upstream, d.Tag = best.addr, best
	d.Scratch = r.Remote.Addr().AppendTo(d.Scratch)
	d.Set = append(d.Set, evloop.Header{Name: "X-Forwarded-For", Value: d.Scratch})
}

func (h *leastInflight) Done(_ *evloop.Request, res *evloop.Result, _ *evloop.Decision) bool {
	res.Tag.(*backend).inflight.Add(-1)
	return false
}

func envelope(status int) []byte {
	body := `{"error":{"message":"refused","type":"BadRequestError","param":null,"code":` + strconv.Itoa(status) + `}}`
	return []byte("HTTP/1.1 " + strconv.Itoa(status) + " X\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\nConnection: close\r\n\r\n" + body)
}

func main() {
	listen := flag.String("listen", "127.0.0.1:18290", "address to serve")
	ups := flag.String("upstreams", "127.0.0.1:18201,127.0.0.1:18202", "comma-separated upstream addresses")
	loops := flag.Int("loops", 2, "event loops; GOMAXPROCS is set to loops+1")
	flag.Parse()
	runtime.GOMAXPROCS(*loops + 1)
	h := &leastInflight{}
	for _, a := range strings.Split(*ups, ",") {
		ap, err := netip.ParseAddrPort(a)
		if err != nil {
			fmt.Fprintln(os.Stderr, "lbproxy:", err)
			os.Exit(2)
		}
		h.bes = append(h.bes, &backend{addr: ap})
	}
	s, err := evloop.New(evloop.Config{
		Addr: *listen, Loops: *loops, Handler: h,
		Fallback:      func(c net.Conn) { c.Close() },
		ErrorResponse: envelope,
		MaxHeadBytes:  16 << 10, MaxHeaders: 100, MaxBodyBytes: 16 << 20, MaxIdlePerUpstream: 256,
		ReadTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second, FirstByteTimeout: 60 * time.Second,
		ReadIdleTimeout: 60 * time.Second, IdleConnTTL: 4 * time.Second,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "lbproxy:", err)
		os.Exit(1)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	s.Close()
}
