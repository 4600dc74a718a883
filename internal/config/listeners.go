package config

import (
	"net"
	"net/netip"
	"strings"
)

// listener is one listen address of the configuration and its key.
type listener struct{ path, addr string }

// listeners returns every address the proxy listens on, with its key.
func (s Server) listeners() []listener {
	return []listener{{"server.listen", s.Listen}, {"server.admin_listen", s.AdminListen}}
}

// overlapping checks that no two listen addresses would bind the same
// socket: the second of each overlapping pair is refused, naming the first.
// Port 0 (a port of the kernel's choosing) overlaps nothing. An address
// that is not host:port is hostPort's to report.
func (v *checker) overlapping(ls []listener) {
	for i, b := range ls {
		for _, a := range ls[:i] {
			if why := listenOverlap(a.addr, b.addr); why != "" {
				v.add(b.path, "%q overlaps %s %q (%s): the two listeners cannot both bind", b.addr, a.path, a.addr, why)
			}
		}
	}
}

// listenOverlap returns why listen addresses a and b would bind the same
// socket, or "" when they would not. They overlap when their ports are
// equal (and not 0) and their hosts meet: the same host; or one of them
// empty or unspecified (0.0.0.0, ::), which Go binds to every address of
// both families; or "localhost" and a loopback address. Other host names
// are compared as written (resolving them here would make the check
// depend on the machine it runs on).
func listenOverlap(a, b string) string {
	ha, pa, err := net.SplitHostPort(a)
	if err != nil {
		return ""
	}
	hb, pb, err := net.SplitHostPort(b)
	if err != nil || pa != pb || pa == "0" {
		return ""
	}
	switch {
	case every(ha) || every(hb):
		return "same port, and one listens on every address"
	case strings.EqualFold(ha, hb):
		return "same address"
	}
	ia, errA := netip.ParseAddr(ha)
	ib, errB := netip.ParseAddr(hb)
	switch {
	case errA == nil && errB == nil && ia.Unmap() == ib.Unmap():
		return "same address"
	case errA == nil && ia.IsLoopback() && strings.EqualFold(hb, "localhost"),
		errB == nil && ib.IsLoopback() && strings.EqualFold(ha, "localhost"):
		return "same port, and localhost is a loopback address"
	}
	return ""
}

// every reports whether a listen host means every address.
func every(host string) bool {
	if host == "" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsUnspecified()
}
