package route

import (
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// A client's max_tokens counts at most maxTokensCap in its backend's
// pending decode work: ten requests in flight asking for
// 999999999999999999 tokens with ignore_eos (a model server caps or
// refuses them) leave their backend loaded in the proxy's account, where
// the sum wrapped past int64 and read as no decode work at all, the
// backend idle to a load model weighing decode.
func TestHugeMaxTokensNeverWrapTheDecodeCount(t *testing.T) {
	release := make(chan struct{})
	be := startRawBackend(t, func(c net.Conn, _ int, head []byte) bool {
		if !strings.HasPrefix(string(head), "POST ") {
			_, err := io.WriteString(c, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
			return err == nil
		}
		<-release
		_, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
		return err == nil
	})
	tp := startProxy(t, testConfig(be.url()))
	const n = 10
	body := `{"model":"m","prompt":"x","max_tokens":999999999999999999,"ignore_eos":true}`
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { postStatus(t, tp.url("/v1/completions"), body) })
	}
	st := tp.Pool().Backends()[0].state
	ftPoll(t, 5*time.Second, "the requests reach the backend", func() bool { return len(be.requests()) == n })
	_, decode, _ := st.Work()
	close(release)
	wg.Wait()
	if decode < n*maxTokensCap {
		t.Fatalf("pending decode with %d such requests in flight: %.0f tokens, want at least %d", n, decode, n*maxTokensCap)
	}
	if _, after, _ := st.Work(); after != 0 {
		t.Fatalf("pending decode after they finished: %.0f", after)
	}
}
