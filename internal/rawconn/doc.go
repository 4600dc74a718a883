// Package rawconn reads and writes TCP sockets with raw read(2) and
// write(2) system calls (on Linux). Socket is the one implementation: route
// embeds it in its client and upstream connections (Socket.Exchange sends
// an upstream request from inside the read that waits for its answer), and
// Conn wraps it as a net.Conn for the proxy's own short exchanges, probes
// and scrapes.
//
// A plain net.Conn Read or Write enters the runtime's "in a system call"
// state. When the process had been idle a moment before (a proxy that
// gets less than its CPUs on a shared machine), the first such call wakes
// the runtime's sysmon thread, which then polls every 20 µs for a while,
// and a loopback write that wakes its peer may stay in the kernel long
// enough for sysmon to hand the caller's processor to another thread,
// which must be woken (a futex) and handed back. A raw call on the
// non-blocking socket never sleeps in the kernel, keeps its processor,
// and at EAGAIN parks on the runtime's poller exactly as the net
// package's own Read and Write do (through syscall.RawConn, which also
// honours deadlines and Close).
package rawconn
