//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package route

import "net"

// peerWroteOrClosed cannot peek portably here: it reports false, and a
// pooled connection is reused as fasthttp would.
func peerWroteOrClosed(net.Conn) bool { return false }
