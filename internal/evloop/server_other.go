//go:build !linux

package evloop

import (
	"context"
	"net"
)

// Server is not available on this platform: New returns ErrUnsupported.
type Server struct{}

// New returns ErrUnsupported: event loops are built on Linux only.
func New(Config) (*Server, error) { return nil, ErrUnsupported }

// Addr returns nil.
func (s *Server) Addr() net.Addr { return nil }

// Close does nothing.
func (s *Server) Close() error { return nil }

// Shutdown does nothing.
func (s *Server) Shutdown(context.Context) error { return nil }

// Resume returns false: there are no loops.
func (s *Server) Resume(Ticket) bool { return false }
