//go:build !linux

package route

import "syscall"

// listenerOptions: elsewhere Listen leaves keep-alive to the net
// package, per accepted connection.
const listenerOptions = false

func setListenerOptions(_, _ string, _ syscall.RawConn) error { return nil }
