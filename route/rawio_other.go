//go:build !linux

package route

import "net"

// rawSocket reads and writes through the net package outside Linux.
type rawSocket struct{ c net.Conn }

func (s *rawSocket) reset(c net.Conn) bool       { s.c = c; return false }
func (s *rawSocket) ok() bool                    { return false }
func (s *rawSocket) read(p []byte) (int, error)  { return s.c.Read(p) }
func (s *rawSocket) write(p []byte) (int, error) { return s.c.Write(p) }

// exchangeResult is what an exchange did with the request.
type exchangeResult uint8

const (
	exchanged exchangeResult = iota // the request was written whole; n and err are the read's
	unusable                        // the socket had stray bytes or was closed by its peer: nothing was written
	notSent                         // writing failed (err): the request never left whole
)

// exchange writes req, then reads into p. Outside Linux ok is false and
// guardedConn never holds a request back, so it has no check to make.
func (s *rawSocket) exchange(req, p []byte, _ bool) (int, exchangeResult, error) {
	if _, err := s.c.Write(req); err != nil {
		return 0, notSent, err
	}
	n, err := s.c.Read(p)
	return n, exchanged, err
}
