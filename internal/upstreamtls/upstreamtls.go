// Package upstreamtls holds the TLS client configuration of the
// connections to https backends (upstream.tls, read by internal/config),
// shared by forwarding (route) and by probes and scrapes (probe), so that
// all of them trust, present and name the same things. A reload swaps the
// configuration in one place; connections dialed after it use the new
// one, and each user can tell whether a pooled connection was dialed under
// the current one.
package upstreamtls

import (
	"crypto/tls"
	"net"
	"sync/atomic"
	"time"

	"github.com/probegate/probegate/internal/config"
)

// Source is the current upstream TLS configuration. The zero value and a
// nil *Source hold the default: the system's roots, no client
// certificate, each backend's host as server name. Safe for concurrent
// use.
type Source struct {
	cur atomic.Pointer[config.ClientTLS]
}

var defaultTLS = &config.ClientTLS{Config: &tls.Config{}}

// NewSource returns a Source holding c.
func NewSource(c config.ClientTLS) *Source {
	s := &Source{}
	s.Store(c)
	return s
}

// Store makes c the configuration of connections dialed from now on, and
// reports whether that changed anything: a c whose Sum equals the current
// one's is not stored (pooled connections stay current).
func (s *Source) Store(c config.ClientTLS) bool {
	if c.Config == nil {
		c = *defaultTLS
	}
	if old := s.cur.Load(); old != nil && old.Sum == c.Sum {
		return false
	}
	s.cur.Store(&c)
	return true
}

func (s *Source) load() *config.ClientTLS {
	if s == nil {
		return defaultTLS
	}
	if c := s.cur.Load(); c != nil {
		return c
	}
	return defaultTLS
}

// Host is the TLS configuration of one backend: its Source's, with the
// backend's host as server name unless upstream.tls.server_name names one.
// Safe for concurrent use.
type Host struct {
	src     *Source
	host    string
	derived atomic.Pointer[derived]
}

type derived struct {
	from *config.ClientTLS
	cfg  *tls.Config
}

// Host returns the configuration of the backend at addr ("host:port").
// s may be nil (the default configuration).
func (s *Source) Host(addr string) *Host {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	return &Host{src: s, host: host}
}

// Config returns the configuration to dial the backend with now. The
// pointer stays the same until the Source changes: a connection dialed
// with another pointer was dialed under an older configuration. Two
// atomic loads, and a clone after a change.
func (h *Host) Config() *tls.Config {
	cur := h.src.load()
	for {
		old := h.derived.Load()
		if old != nil && old.from == cur {
			return old.cfg
		}
		cfg := cur.Config.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName = h.host
		}
		// Two dials deriving at once keep one result between them.
		if h.derived.CompareAndSwap(old, &derived{from: cur, cfg: cfg}) {
			return cfg
		}
	}
}

// Handshake completes a TLS client handshake over c with cfg before
// deadline, and returns the connection with no deadline left on it. On an
// error c is not closed: the caller closes the socket it dialed.
func Handshake(c net.Conn, cfg *tls.Config, deadline time.Time) (*tls.Conn, error) {
	tc := tls.Client(c, cfg)
	err := tc.SetDeadline(deadline)
	if err == nil {
		err = tc.Handshake()
	}
	if err == nil {
		err = tc.SetDeadline(time.Time{})
	}
	if err != nil {
		return nil, err
	}
	return tc, nil
}
