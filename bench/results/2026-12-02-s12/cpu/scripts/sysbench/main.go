//go:build ignore

// sysbench: nanoseconds per system call on this machine (an EAGAIN read, getsockopt SO_ERROR,
// ioctl SIOCINQ, recv MSG_PEEK, getpid) on a connected loopback TCP socket.
//
//	go run bench/results/2026-12-02-s12/cpu/scripts/sysbench/main.go

package main

import (
	"fmt"
	"net"
	"syscall"
	"time"
	"unsafe"
)

func main() {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go func() { c, _ := ln.Accept(); time.Sleep(time.Hour); _ = c }()
	c, _ := net.Dial("tcp", ln.Addr().String())
	rc, _ := c.(*net.TCPConn).SyscallConn()
	var fd uintptr
	rc.Control(func(f uintptr) { fd = f })
	buf := make([]byte, 4096)
	const N = 200000
	t := time.Now()
	for i := 0; i < N; i++ {
		syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&buf[0])), 4096)
	}
	fmt.Println("read EAGAIN ns", time.Since(t).Nanoseconds()/N)
	t = time.Now()
	var v int32
	l := uint32(4)
	for i := 0; i < N; i++ {
		syscall.RawSyscall6(syscall.SYS_GETSOCKOPT, fd, syscall.SOL_SOCKET, syscall.SO_ERROR, uintptr(unsafe.Pointer(&v)), uintptr(unsafe.Pointer(&l)), 0)
	}
	fmt.Println("getsockopt SO_ERROR ns", time.Since(t).Nanoseconds()/N)
	t = time.Now()
	for i := 0; i < N; i++ {
		syscall.RawSyscall(syscall.SYS_IOCTL, fd, 0x541B, uintptr(unsafe.Pointer(&v)))
	}
	fmt.Println("ioctl SIOCINQ ns", time.Since(t).Nanoseconds()/N)
	t = time.Now()
	for i := 0; i < N; i++ {
		syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&buf[0])), 1, syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
	}
	fmt.Println("recv PEEK ns", time.Since(t).Nanoseconds()/N)
	t = time.Now()
	for i := 0; i < N; i++ {
		syscall.RawSyscall(syscall.SYS_GETPID, 0, 0, 0)
	}
	fmt.Println("getpid ns", time.Since(t).Nanoseconds()/N)
}
