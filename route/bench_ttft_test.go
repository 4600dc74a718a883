package route

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkStreamFirstToken measures what a streaming client waits for:
// the time from writing its request to reading the first SSE frame
// (ttft-us), through the proxy (least_inflight, a keep-alive HTTP/1.1
// client, so the stream is pumped over the hijacked connection). The
// upstream sends its head at once and the first frame gap later (a
// model's queue and prefill), then [DONE]. ns/op is the whole stream.
func BenchmarkStreamFirstToken(b *testing.B) {
	for _, gap := range []time.Duration{0, time.Millisecond} {
		b.Run("gap="+gap.String(), func(b *testing.B) {
			up := startRawBackend(b, func(c net.Conn, _ int, _ []byte) bool {
				_, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
				if err != nil {
					return false
				}
				if gap > 0 {
					time.Sleep(gap)
				}
				_, err = io.WriteString(c, "d\r\ndata: first\n\n\r\ne\r\ndata: [DONE]\n\n\r\n0\r\n\r\n")
				return err == nil
			})
			addr := serveBenchProxy(b, "least_inflight", up.url())
			c, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			br := bufio.NewReader(c)
			req := []byte("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 15\r\n\r\n{\"stream\":true}")
			ttft := make([]time.Duration, 0, 1<<16)
			b.ReportAllocs()
			for b.Loop() {
				t0 := time.Now()
				if _, err := c.Write(req); err != nil {
					b.Fatal(err)
				}
				first := false
				for {
					line, err := br.ReadSlice('\n')
					if err != nil {
						b.Fatal(err)
					}
					if !first && bytes.HasPrefix(line, []byte("data: first")) {
						first = true
						if len(ttft) < cap(ttft) {
							ttft = append(ttft, time.Since(t0))
						}
					}
					if string(line) == "0\r\n" {
						if _, err := br.ReadSlice('\n'); err != nil {
							b.Fatal(err)
						}
						break
					}
					if strings.HasPrefix(string(line), "HTTP/1.1 ") && !strings.HasPrefix(string(line), "HTTP/1.1 200") {
						b.Fatalf("status line %q", line)
					}
				}
				if !first {
					b.Fatal("no first frame")
				}
			}
			slices.Sort(ttft)
			if len(ttft) > 0 {
				b.ReportMetric(float64(ttft[len(ttft)/2].Nanoseconds())/1e3, "ttft-p50-us")
				b.ReportMetric(float64(ttft[len(ttft)*99/100].Nanoseconds())/1e3, "ttft-p99-us")
			}
		})
	}
}
