//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package route

import (
	"net"
	"time"
)

// waitReadable reports true at once where sockets cannot be peeked: the
// connection's reader waits for the next request instead.
func waitReadable(net.Conn, time.Duration) bool { return true }
