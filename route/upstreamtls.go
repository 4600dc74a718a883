package route

import (
	"crypto/tls"
	"errors"
	"net"
	"time"
)

// tlsDialer opens the connections to one https backend. The proxy shakes
// hands itself instead of letting fasthttp wrap the socket
// (HostClient.IsTLS), so that guardedConn holds both the TLS connection
// and the socket under it (a recordConn) and can check both before a
// reuse. The TLS configuration is the one fasthttp built: the system's
// roots, the backend's host as server name (sent as SNI unless it is an
// IP address, and verified against the certificate either way), no
// session cache.
//
// The handshake must end within handshake (upstream.first_byte_timeout).
// fasthttp shook hands lazily in the first request's write, under
// deadlineConn's deadlines, so the server's first flight had that bound
// before; a handshake that fails or times out is now a dial error: the
// request never left, it counts against the backend and is re-picked.
type tlsDialer struct {
	tcp       *net.Dialer
	cfg       *tls.Config
	handshake time.Duration
}

func newTLSDialer(tcp *net.Dialer, addr string, handshake time.Duration) *tlsDialer {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	return &tlsDialer{tcp: tcp, cfg: &tls.Config{ServerName: host}, handshake: handshake}
}

func (d *tlsDialer) dial(addr string) (net.Conn, error) {
	c, err := d.tcp.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	tc := tls.Client(&recordConn{Conn: c}, d.cfg)
	err = tc.SetDeadline(time.Now().Add(d.handshake))
	if err == nil {
		err = tc.Handshake()
	}
	if err == nil {
		err = tc.SetDeadline(time.Time{})
	}
	if err != nil {
		_ = c.Close()
		return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: c.RemoteAddr(), Err: err}
	}
	return tc, nil
}

// recordConn is the socket under an upstream TLS connection. It follows
// the record framing of the bytes it hands up (each TLS record is a 5-byte
// header ending in the length of what follows), so it knows whether the
// TLS connection holds the start of a record it has not read to its end;
// and while probing it refuses to read, so that a Read of the TLS
// connection returns only what that connection already holds. A refused
// read is a temporary timeout, which crypto/tls does not keep as the
// connection's error: the connection stays usable.
//
// Like guardedConn, it is used by one request at a time.
type recordConn struct {
	net.Conn
	probing bool
	hdrN    int     // bytes of the current record's header seen
	left    int     // bytes of the current record's body still to come
	hdr     [5]byte // the current record's header
}

// errProbe is what recordConn's Read returns while probing.
var errProbe error = probeError{}

type probeError struct{}

func (probeError) Error() string   { return "upstream TLS probe: no socket read" }
func (probeError) Timeout() bool   { return true }
func (probeError) Temporary() bool { return true }

func (r *recordConn) Read(p []byte) (int, error) {
	if r.probing {
		return 0, errProbe
	}
	n, err := r.Conn.Read(p)
	r.track(p[:n])
	return n, err
}

// track advances the record framing over b, bytes just handed up.
func (r *recordConn) track(b []byte) {
	for len(b) > 0 {
		if r.left > 0 {
			k := min(r.left, len(b))
			r.left -= k
			b = b[k:]
			continue
		}
		k := copy(r.hdr[r.hdrN:], b)
		r.hdrN += k
		b = b[k:]
		if r.hdrN == len(r.hdr) {
			r.hdrN, r.left = 0, int(r.hdr[3])<<8|int(r.hdr[4])
		}
	}
}

// unread reports whether tc, a TLS connection over r, holds anything its
// reader has not taken: plaintext already decrypted, whole records not yet
// decrypted (a Read that may not touch the socket returns their data, or
// an error for an alert or a bad record; post-handshake messages such as
// TLS 1.3 session tickets are consumed and are not data), or the start of
// a record. buf receives at most one byte of data, which is lost: the
// connection is to be replaced anyway.
func (r *recordConn) unread(tc *tls.Conn, buf []byte) bool {
	r.probing = true
	n, err := tc.Read(buf)
	r.probing = false
	return n > 0 || !errors.Is(err, errProbe) || r.hdrN > 0 || r.left > 0
}
