//go:build linux

package route

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// peerAcked reports whether the peer's TCP acknowledged every byte sent on
// c (TCP_INFO: bytes acknowledged against bytes sent less retransmitted
// ones), and whether that could be read (known: c is a TCP socket). It
// reads the counters of a socket the peer already reset too. Called only
// when an exchange failed before its answer's first byte.
func peerAcked(c net.Conn) (acked, known bool) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false, false
	}
	var info *unix.TCPInfo
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil || gerr != nil {
		return false, false
	}
	return info.Bytes_acked >= info.Bytes_sent-info.Bytes_retrans, true
}
