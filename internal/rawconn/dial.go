package rawconn

import (
	"net"
	"time"
)

// DialTimeout connects to the TCP address addr within timeout (no limit
// when timeout <= 0) and returns the connection wrapped (Wrap).
func DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	return Wrap(c), nil
}
