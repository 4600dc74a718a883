//go:build !linux

package route

import "net"

// rawSocket is unused outside Linux: connections read and write through
// the net package.
type rawSocket struct{}

func (s *rawSocket) reset(net.Conn) bool       { return false }
func (s *rawSocket) ok() bool                  { return false }
func (s *rawSocket) read([]byte) (int, error)  { panic("rawSocket: not in use") }
func (s *rawSocket) write([]byte) (int, error) { panic("rawSocket: not in use") }
