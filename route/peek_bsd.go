//go:build darwin || freebsd || netbsd || openbsd || dragonfly

package route

import "syscall"

// peekFD is recv(fd, buf, MSG_PEEK|MSG_DONTWAIT) (on Linux a raw system
// call, see peek_linux.go).
func peekFD(fd uintptr, buf []byte) (int, error) {
	n, _, err := syscall.Recvfrom(int(fd), buf, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return n, err
}

// writeFD is write(2) on a non-blocking socket (on Linux a raw system
// call, see peek_linux.go).
func writeFD(fd uintptr, b []byte) (int, error) {
	return syscall.Write(int(fd), b)
}
