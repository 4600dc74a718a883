package config

import (
	"net"
	"strings"
	"testing"
)

// Listen addresses that would bind the same socket are refused, the
// message naming both keys; addresses that can both bind are accepted.
// With the check as it was (identical strings only) the 9 refused rows
// whose strings differ are accepted.
func TestOverlappingListenersAreRefused(t *testing.T) {
	for _, tc := range []struct {
		listen, admin string
		refused       bool
	}{
		{":8080", ":8080", true},
		{":8080", "127.0.0.1:8080", true},
		{"0.0.0.0:8080", "127.0.0.1:8080", true},
		{"127.0.0.1:8080", "[::]:8080", true},
		{"[::]:8080", "[::1]:8080", true},
		{"0.0.0.0:8080", "[::1]:8080", true},
		{"127.0.0.1:8080", "127.0.0.1:8080", true},
		{"127.0.0.1:8080", "[::ffff:127.0.0.1]:8080", true},
		{"localhost:8080", "127.0.0.1:8080", true},
		{"[::1]:8080", "LOCALHOST:8080", true},
		{"pod.internal:8080", "POD.internal:8080", true},
		{":8080", "127.0.0.1:9090", false},
		{"127.0.0.1:8080", "127.0.0.2:8080", false},
		{"10.0.0.1:8080", "localhost:8080", false},
		{":0", ":0", false},
		{"127.0.0.1:0", "127.0.0.1:0", false},
	} {
		c := valid()
		c.Server.Listen, c.Server.AdminListen = tc.listen, tc.admin
		err := c.Validate()
		if !tc.refused {
			if err != nil {
				t.Errorf("listen %q, admin %q: refused: %v", tc.listen, tc.admin, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("listen %q, admin %q: accepted", tc.listen, tc.admin)
			continue
		}
		errs := problems(t, err)
		if len(errs) != 1 || errs[0].Path != "server.admin_listen" || !strings.Contains(errs[0].Msg, "server.listen") {
			t.Errorf("listen %q, admin %q: %v, want one problem at server.admin_listen naming server.listen", tc.listen, tc.admin, err)
		}
	}
}

// The wildcard rule is the kernel's: with Go's "tcp" listeners, a port
// bound on every address refuses a loopback bind of the same port, in
// either order.
func TestWildcardListenerTakesTheLoopbackPort(t *testing.T) {
	for _, pair := range [][2]string{{":0", "127.0.0.1"}, {"127.0.0.1:0", ""}} {
		first, err := net.Listen("tcp", pair[0])
		if err != nil {
			t.Skipf("listen %s: %v", pair[0], err)
		}
		_, port, _ := net.SplitHostPort(first.Addr().String())
		second := net.JoinHostPort(pair[1], port)
		if why := listenOverlap(pair[0][:len(pair[0])-1]+port, second); why == "" {
			t.Errorf("%s and %s: no overlap found", first.Addr(), second)
		}
		ln, err := net.Listen("tcp", second)
		if err == nil {
			ln.Close()
			t.Errorf("%s bound beside %s: the rule is wrong here", second, first.Addr())
		}
		first.Close()
	}
}
