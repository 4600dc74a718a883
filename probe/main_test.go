package probe

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// fasthttp's per-HostClient idle-connection cleaner sleeps up to
		// MaxIdleConnDuration before noticing it has nothing left to clean.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
		// fasthttp's default dialer keeps one DNS-cache cleaner per process.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
		// The test servers' (fasthttp.Server) date updater, one per process,
		// and worker-pool cleaners, which sleep up to 10s after Shutdown.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
	)
}
