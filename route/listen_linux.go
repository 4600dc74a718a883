package route

import (
	"os"
	"syscall"
	"time"
)

// listenerOptions: Linux copies a listening socket's SO_KEEPALIVE,
// TCP_KEEPIDLE, TCP_KEEPINTVL and TCP_KEEPCNT to every socket it accepts
// (the accepted socket is cloned from the listening one), and arms the
// keep-alive timer of the clone.
const listenerOptions = true

// setListenerOptions is Listen's net.ListenConfig.Control: it sets the
// client keep-alive options on the listening socket before it binds.
func setListenerOptions(_, _ string, c syscall.RawConn) error {
	var err error
	cerr := c.Control(func(fd uintptr) {
		opts := [...]struct{ level, opt, v int }{
			{syscall.SOL_SOCKET, syscall.SO_KEEPALIVE, 1},
			{syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE, int(clientKeepAliveIdle / time.Second)},
			{syscall.IPPROTO_TCP, syscall.TCP_KEEPINTVL, int(clientKeepAliveInterval / time.Second)},
			{syscall.IPPROTO_TCP, syscall.TCP_KEEPCNT, clientKeepAliveCount},
		}
		for _, o := range opts {
			if err = syscall.SetsockoptInt(int(fd), o.level, o.opt, o.v); err != nil {
				err = os.NewSyscallError("setsockopt", err)
				return
			}
		}
	})
	if cerr != nil {
		return cerr
	}
	return err
}
