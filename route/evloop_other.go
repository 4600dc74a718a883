//go:build !linux

package route

import (
	"context"
	"net"

	"github.com/probegate/probegate/internal/evloop"
)

// loopServer is empty where event loops are not built (server.event_loop
// is refused by the configuration's Validate there).
type loopServer struct{}

// loopReq is the loop path's per-request state (Linux only).
type loopReq struct{ rc *reqCtx }

// ServeLoops returns evloop.ErrUnsupported: event loops are Linux only.
func (p *Proxy) ServeLoops(addr string, loops int) (net.Addr, error) {
	return nil, evloop.ErrUnsupported
}

func (p *Proxy) servesLoops() bool { return false }

func (p *Proxy) stopLoops() {}

func (p *Proxy) shutdownLoops(context.Context) <-chan struct{} {
	done := make(chan struct{})
	close(done)
	return done
}

func (p *Proxy) loopCounts() (served, handedOver uint64) { return 0, 0 }
