//go:build !linux

package route

import "net"

// peerAcked cannot read the peer's acknowledgements here: not known, so
// every drop after the write counts as delivered (poison.go).
func peerAcked(net.Conn) (acked, known bool) { return false, false }
