//go:build ignore

// minproxy is the least a fasthttp reverse proxy does: one fasthttp.Server
// whose handler sends each request to one of two upstreams in turn through a
// fasthttp.HostClient and answers with what came back. No probegate code.
// It measures what the library and the Go runtime cost per request, beside
// probegate under the same load (see ../../README.md).
//
//	go build -o /tmp/cpu12/minproxy bench/results/2026-12-02-s12/cpu/scripts/minproxy/main.go
//	minproxy -listen 127.0.0.1:18080 -up 127.0.0.1:18001,127.0.0.1:18002 [-timeouts] [-admin]
package main

import (
	"flag"
	"log"
	"net/http"
	_ "net/http/pprof"
	"strings"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:18080", "address to serve on")
	ups := flag.String("up", "127.0.0.1:18001,127.0.0.1:18002", "upstreams, comma-separated")
	timeouts := flag.Bool("timeouts", false, "arm probegate's server read/write/idle timeouts and client read/write timeouts")
	admin := flag.Bool("admin", false, "serve net/http/pprof on 127.0.0.1:18081")
	flag.Parse()
	if *admin {
		go func() { log.Println(http.ListenAndServe("127.0.0.1:18081", nil)) }()
	}
	var hcs []*fasthttp.HostClient
	for _, a := range strings.Split(*ups, ",") {
		hc := &fasthttp.HostClient{Addr: a, MaxConns: 20000, ReadBufferSize: 4096}
		if *timeouts {
			hc.ReadTimeout, hc.WriteTimeout = 60*time.Second, 60*time.Second
		}
		hcs = append(hcs, hc)
	}
	var n atomic.Uint64
	s := &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			hc := hcs[n.Add(1)%uint64(len(hcs))]
			req := &ctx.Request
			req.SetHost(hc.Addr)
			if err := hc.Do(req, &ctx.Response); err != nil {
				ctx.Error(err.Error(), fasthttp.StatusBadGateway)
			}
		},
		NoDefaultServerHeader: true,
		NoDefaultContentType:  true,
	}
	if *timeouts {
		s.ReadTimeout, s.WriteTimeout, s.IdleTimeout = 60*time.Second, 60*time.Second, 90*time.Second
	}
	log.Fatal(s.ListenAndServe(*listen))
}
