package route

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/probegate/probegate/internal/upstreamtls"
)

// tlsDialer opens the connections to one https backend. The proxy shakes
// hands itself instead of letting fasthttp wrap the socket
// (HostClient.IsTLS), so that guardedConn holds both the TLS connection
// and the socket under it (a recordConn) and can check both before a
// reuse. The TLS configuration is upstream.tls's, from host (the system's
// roots, or ca_file's; a client certificate when configured; the
// backend's host as server name, sent as SNI unless it is an IP address
// and verified against the certificate either way, unless server_name
// names another), read at each dial, so a reload applies to every
// connection dialed after it. No session cache.
//
// The TCP connect and the handshake together must end within connect
// (upstream.connect_timeout): establishing the connection is one step to
// an operator, as to curl's --connect-timeout and nginx's
// proxy_connect_timeout. A handshake that fails or times out is a dial
// error: the request never left, it counts against the backend and is
// re-picked. A failure that is not a timeout (a certificate that does not
// verify, a refused client certificate, no common version) also wraps
// ErrUpstreamTLS, which the client gets as 502, and is logged (at most
// once per tlsFailureLogEvery per backend) with its cause.
type tlsDialer struct {
	tcp     *net.Dialer
	host    *upstreamtls.Host
	connect time.Duration
	log     zerolog.Logger
	addr    string
	logged  atomic.Int64 // when a failure was last logged, Unix ns
}

// tlsFailureLogEvery spaces a backend's handshake failure logs: a fleet
// with a wrong CA fails every dial, and each request's own failure is in
// the access log.
const tlsFailureLogEvery = 10 * time.Second

func newTLSDialer(tcp *net.Dialer, addr string, host *upstreamtls.Host, connect time.Duration, log zerolog.Logger) *tlsDialer {
	return &tlsDialer{tcp: tcp, host: host, connect: connect, log: log, addr: addr}
}

func (d *tlsDialer) dial(addr string) (net.Conn, error) {
	deadline := time.Now().Add(d.connect)
	c, err := d.tcp.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	cfg := d.host.Config()
	tc, err := upstreamtls.Handshake(&recordConn{Conn: c, cfg: cfg}, cfg, deadline)
	if err != nil {
		_ = c.Close()
		if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			err = fmt.Errorf("%w: %w", ErrUpstreamTLS, err)
			d.logFailure(err, "upstream TLS handshake failed (see upstream.tls)")
		}
		return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: c.RemoteAddr(), Err: err}
	}
	return tc, nil
}

// noteReadError logs a TLS alert the backend sent on an established
// connection: under TLS 1.3 the server checks the client's certificate
// after the client's side of the handshake completed, so a missing or
// refused certificate (upstream.tls.cert_file) shows only on the first
// read, and fasthttp reports it as a connection closed before the first
// response byte.
func (d *tlsDialer) noteReadError(err error) {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "remote error" {
		d.logFailure(err, "upstream TLS refused by the backend (see upstream.tls; under TLS 1.3 a missing or refused client certificate shows here)")
	}
}

// logFailure logs a TLS failure, unless one was logged within
// tlsFailureLogEvery.
func (d *tlsDialer) logFailure(err error, msg string) {
	now := time.Now().UnixNano()
	last := d.logged.Load()
	if last != 0 && now-last < int64(tlsFailureLogEvery) || !d.logged.CompareAndSwap(last, now) {
		return
	}
	d.log.Error().Str("backend", d.addr).Str("server_name", d.host.Config().ServerName).Err(err).
		Msg(msg)
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
	cfg     *tls.Config // the TLS configuration the connection was dialed with
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
