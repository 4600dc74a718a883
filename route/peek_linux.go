//go:build linux

package route

import (
	"syscall"
	"unsafe"
)

// peekFD is recv(fd, buf, MSG_PEEK|MSG_DONTWAIT) as a raw system call: it
// never blocks, so it need not tell the scheduler it is in a system call.
// A plain syscall.Recvfrom does (entersyscall), and when the scheduler's
// monitor thread (sysmon) is parked because the proxy was idle a moment
// ago, entering a system call wakes it with a futex; it then polls every
// 20 µs until the proxy is idle again. The peek runs before a request
// longer than one write (or over TLS) on a reused upstream connection
// (upstreamguard.go; a shorter one is checked by a read inside
// rawconn.Socket.Exchange), and after each hijacked stream (waitReadable); it
// was the request path's only such call: under wrk, the wake-ups and
// sysmon's polling were about a quarter of the proxy's context switches.
func peekFD(fd uintptr, buf []byte) (int, error) {
	for {
		n, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)),
			syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
		switch e {
		case 0:
			return int(n), nil
		case syscall.EINTR:
			continue
		default:
			return -1, e
		}
	}
}

// writeFD is write(2) as a raw system call, for a non-blocking socket (it
// never blocks: see peekFD).
func writeFD(fd uintptr, b []byte) (int, error) {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		switch e {
		case 0:
			return int(n), nil
		case syscall.EINTR:
			continue
		default:
			return -1, e
		}
	}
}
