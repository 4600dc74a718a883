package kube

import (
	"bytes"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/probegate/probegate/route"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// klog's flush daemon starts with the package and never stops.
		goleak.IgnoreAnyFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		// fasthttp's background sleepers (as in route's tests): they wake
		// after seconds and exit; none of them is ours.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
	)
}

// logBuf is a goroutine-safe log sink.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), msg)
}

func (l *logBuf) logger() zerolog.Logger { return zerolog.New(l) }

// sets records every published set, in order.
type sets struct {
	ch chan []route.Target
}

func newSets() *sets { return &sets{ch: make(chan []route.Target, 64)} }

func (s *sets) publish(ts []route.Target) { s.ch <- ts }

// next waits up to 5s for the next published set and returns its URLs.
func (s *sets) next(t *testing.T) []string {
	t.Helper()
	return s.nextWithin(t, 5*time.Second)
}

// nextWithin is next with its own bound, for waits that include the
// informer's reconnection backoff.
func (s *sets) nextWithin(t *testing.T, d time.Duration) []string {
	t.Helper()
	select {
	case ts := <-s.ch:
		return urls(ts)
	case <-time.After(d):
		t.Fatalf("no set published within %v", d)
		return nil
	}
}

// none asserts that nothing is published for d.
func (s *sets) none(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case ts := <-s.ch:
		t.Fatalf("unexpected set published: %v", urls(ts))
	case <-time.After(d):
	}
}

func urls(ts []route.Target) []string {
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.URL)
	}
	return out
}

func want(t *testing.T, got []string, exp ...string) {
	t.Helper()
	if exp == nil {
		exp = []string{}
	}
	if !slices.Equal(got, exp) {
		t.Fatalf("set = %v, want %v", got, exp)
	}
}

func ptr[T any](v T) *T { return &v }
