package route

import (
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// A refused request (431, 413, 400, ...) ends its connection while the
// client may still be sending: the rest of an oversized header or body, or
// whatever followed a request whose framing cannot be trusted. Closing a
// socket with unread bytes in its receive buffer, or receiving bytes after
// the close, makes the kernel answer with a reset (RFC 1122 section
// 4.2.2.13). The reset discards the proxy's unsent response if it was still
// queued, and a client that is still writing sees its write fail with
// "connection reset" or "broken pipe" instead of reading the refusal; Go's
// http.Client then reports the write error rather than the response.
//
// So the proxy closes such a connection as nginx does (lingering_close):
// after the response it shuts down its sending side (FIN, so the client
// reads the response and then EOF), reads and discards what the client
// still sends, and closes once the client closes too, or at the bounds
// below, whichever comes first.
//
// lingerTime and lingerMaxBytes bound what a refused client can cost: one
// connection and its goroutine for at most lingerTime, at most
// lingerMaxBytes read. They are not config keys: they only give a client
// time to read a refusal it was sent (a client reading while it sends needs
// well under a second on any network a vLLM fleet serves), and no operator
// decision depends on them; a client that sends more than lingerMaxBytes
// before it reads gets the reset, as it would from nginx once its
// lingering_time is over.
const (
	lingerTime     = 2 * time.Second
	lingerMaxBytes = 256 << 10
)

// closeAfterRefusal marks the request's connection to be closed after its
// (error) response, with a lingering close. Connections that are not a
// clientConn (none in the proxy) are closed plainly.
func closeAfterRefusal(ctx *fasthttp.RequestCtx) {
	ctx.SetConnectionClose()
	if cc, ok := ctx.Conn().(*clientConn); ok {
		cc.lingerOnClose.Store(true)
	}
}

// lingerBufs holds the buffers lingering closes discard into, so that a
// flood of refused requests does not allocate one each.
var lingerBufs = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}

// linger shuts down c's sending side, then reads and discards what the peer
// sends until it closes its side, an error, d has passed or max bytes were
// read. It returns how many bytes it discarded. The caller closes c; a
// concurrent Close (Shutdown cutting connections) ends the wait at once.
func linger(c net.Conn, d time.Duration, max int) int {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		// An error means the peer is gone (a reset already) or this is a
		// TLS connection whose handshake never finished: either way the
		// read below ends quickly or at the bounds.
		_ = cw.CloseWrite()
	}
	if c.SetReadDeadline(time.Now().Add(d)) != nil {
		return 0
	}
	bp := lingerBufs.Get().(*[]byte)
	defer lingerBufs.Put(bp)
	buf := *bp
	n := 0
	for n < max {
		k, err := c.Read(buf[:min(len(buf), max-n)])
		n += k
		if err != nil {
			break
		}
	}
	return n
}
