//go:build !linux

package rawconn

import "net"

// Socket reads and writes through the net package outside Linux.
type Socket struct{ c net.Conn }

// Reset points s at c; outside Linux it always reports false.
func (s *Socket) Reset(c net.Conn) bool { s.c = c; return false }

// OK reports false: outside Linux no raw system calls are used.
func (s *Socket) OK() bool { return false }

// Read is c's Read.
func (s *Socket) Read(p []byte) (int, error) { return s.c.Read(p) }

// ReadLent is a Read of c into l's buffer: outside Linux the buffer is
// lent for the whole wait.
func (s *Socket) ReadLent(l Lender) (int, error) { return s.c.Read(l.Lend()) }

// Write is c's Write.
func (s *Socket) Write(p []byte) (int, error) { return s.c.Write(p) }

// Exchange writes req, then reads into p. Outside Linux OK is false and
// route never holds a request back, so it has no check to make.
func (s *Socket) Exchange(req, p []byte, _ bool) (int, ExchangeResult, error) {
	if _, err := s.c.Write(req); err != nil {
		return 0, NotSent, err
	}
	n, err := s.c.Read(p)
	return n, Exchanged, err
}
