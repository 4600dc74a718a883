//go:build !linux

package bench

import "errors"

// rawUpstreamSupported reports whether this OS has the raw upstream (an
// epoll loop: Linux only); elsewhere the fasthttp upstream serves.
const rawUpstreamSupported = false

type rawUpstream struct{}

func newRawUpstream(string) (*rawUpstream, error) {
	return nil, errors.New("the raw upstream needs Linux's epoll")
}

func (*rawUpstream) Addr() string { return "" }
func (*rawUpstream) Serve() error { return nil }
func (*rawUpstream) Close()       {}
