package vllmsim

import (
	"fmt"
	"net"
	"strconv"
)

// Fleet is a set of Servers started together. Its methods are safe for concurrent
// use; the slices they return are fresh copies.
type Fleet struct {
	servers []*Server
}

// StartFleet starts n servers on host, at ports basePort..basePort+n-1 (basePort 0:
// each on an ephemeral port). Server i gets cfg with Seed = cfg.Seed+i. On error the
// servers already started are closed.
func StartFleet(n int, host string, basePort int, cfg Config) (*Fleet, error) {
	if n < 1 {
		return nil, fmt.Errorf("vllmsim: fleet size must be >= 1, got %d", n)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	f := &Fleet{}
	for i := range n {
		c := cfg
		c.Seed = cfg.Seed + int64(i)
		s := NewServer(c)
		port := 0
		if basePort != 0 {
			port = basePort + i
		}
		if err := s.Start(net.JoinHostPort(host, strconv.Itoa(port))); err != nil {
			f.Close()
			return nil, fmt.Errorf("vllmsim: server %d: %w", i, err)
		}
		f.servers = append(f.servers, s)
	}
	return f, nil
}

// Servers returns the fleet's servers in port order.
func (f *Fleet) Servers() []*Server { return append([]*Server(nil), f.servers...) }

// URLs returns each server's base URL ("http://host:port").
func (f *Fleet) URLs() []string {
	out := make([]string, len(f.servers))
	for i, s := range f.servers {
		out[i] = s.URL()
	}
	return out
}

// Addrs returns each server's host:port.
func (f *Fleet) Addrs() []string {
	out := make([]string, len(f.servers))
	for i, s := range f.servers {
		out[i] = s.Addr()
	}
	return out
}

// SetFaults sets the same faults on every server.
func (f *Fleet) SetFaults(fa Faults) {
	for _, s := range f.servers {
		s.SetFaults(fa)
	}
}

// Close closes every server (see Server.Close). Closing twice does nothing.
func (f *Fleet) Close() {
	for _, s := range f.servers {
		_ = s.Close()
	}
}
