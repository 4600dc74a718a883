//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package route

import "net"

// peeker cannot peek portably here: it reports false, and a pooled
// connection is reused as fasthttp would.
type peeker struct{}

func (p *peeker) reset(net.Conn)      {}
func (p *peeker) wroteOrClosed() bool { return false }
func (p *peeker) ok() bool            { return false }

// tryWrite is never called here (ok is false).
func (p *peeker) tryWrite([]byte) (int, bool) { return 0, false }

// answered is never called here (ok is false).
func (p *peeker) answered() bool { return false }
