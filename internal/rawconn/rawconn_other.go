//go:build !linux

package rawconn

import "net"

// Wrap returns c: outside Linux the net package's Read and Write are used.
func Wrap(c net.Conn) net.Conn { return c }
