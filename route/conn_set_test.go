package route

import (
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/probegate/probegate/internal/testutil"
)

// TestConnSetClosesExactlyTheOpenConnections: connections added and
// removed from many goroutines at once (some removed twice, as fasthttp
// may report a hijacked connection and then its close; some never added);
// closeAll then closes every connection still in the set and none that
// left it.
func TestConnSetClosesExactlyTheOpenConnections(t *testing.T) {
	for range 20 {
		var s connSet
		const workers, each = 8, 150
		kept := make([][]*closeConn, workers)
		left := make([][]*closeConn, workers)
		testutil.Together(workers, func(w int) {
			for i := range each {
				raw := newCloseConn()
				c := newClientConn(raw, nil)
				if i%5 == 4 {
					s.remove(c) // never added
					left[w] = append(left[w], raw)
					continue
				}
				s.add(c)
				if i%2 == 0 {
					kept[w] = append(kept[w], raw)
					continue
				}
				s.remove(c)
				s.remove(c)
				left[w] = append(left[w], raw)
			}
		})
		s.closeAll()
		for w := range workers {
			for _, raw := range kept[w] {
				if !raw.isClosed() {
					t.Fatal("closeAll left an open connection of the set open")
				}
			}
			for _, raw := range left[w] {
				if raw.isClosed() {
					t.Fatal("closeAll closed a connection removed from the set")
				}
			}
		}
	}
}

// TestConnSetIgnoresDetachedSockets: a hijacked connection's clientConn is
// detached; closing it through the set leaves the socket to its stream.
func TestConnSetIgnoresDetachedSockets(t *testing.T) {
	var s connSet
	raw := newCloseConn()
	c := newClientConn(raw, nil)
	s.add(c)
	c.detached.Store(true)
	s.closeAll()
	if raw.isClosed() {
		t.Fatal("closeAll closed the socket of a detached connection")
	}
}

// BenchmarkConnSet is one client connection's bookkeeping: added when
// fasthttp reports it new, removed when it reports it closed.
func BenchmarkConnSet(b *testing.B) {
	p := &Proxy{}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		c := newClientConn(newCloseConn(), nil)
		for pb.Next() {
			p.trackConn(c, fasthttp.StateNew)
			p.trackConn(c, fasthttp.StateClosed)
		}
	})
}
