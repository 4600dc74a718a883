//go:build !linux

package route

import "net"

// rawSocket reads and writes through the net package outside Linux.
type rawSocket struct{ c net.Conn }

func (s *rawSocket) reset(c net.Conn) bool       { s.c = c; return false }
func (s *rawSocket) ok() bool                    { return false }
func (s *rawSocket) read(p []byte) (int, error)  { return s.c.Read(p) }
func (s *rawSocket) write(p []byte) (int, error) { return s.c.Write(p) }
