package vllmsim

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rawHeaderNames sends req on a raw connection and returns the header names
// of the answer exactly as written on the wire.
func rawHeaderNames(t *testing.T, addr, req string) []string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	var names []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			return names
		}
		k, _, _ := strings.Cut(line, ":")
		names = append(names, k)
	}
}

// With LowercaseHeaders the simulator writes its own header names in
// lowercase on the wire, as uvicorn does, including the ORCA header and the
// echoed request id, for both non-streaming and streaming answers.
func TestLowercaseHeaderNamesOnTheWire(t *testing.T) {
	body := `{"model":"meta-llama/Llama-3.1-8B-Instruct","prompt":"hi","max_tokens":2%s}`
	for _, lower := range []bool{false, true} {
		s := startServer(t, func(c *Config) { c.LowercaseHeaders = lower })
		addr := strings.TrimPrefix(s.URL(), "http://")
		for _, stream := range []string{"", `,"stream":true`} {
			b := strings.Replace(body, "%s", stream, 1)
			req := "POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Request-Id: id-1\r\nEndpoint-Load-Metrics-Format: TEXT\r\n" +
				"Content-Type: application/json\r\nConnection: close\r\nContent-Length: " + itoa(len(b)) + "\r\n\r\n" + b
			names := rawHeaderNames(t, addr, req)
			want := map[string]bool{"x-request-id": true, "content-type": true}
			if stream == "" {
				want["endpoint-load-metrics"] = true
			}
			seen := map[string]int{}
			for _, n := range names {
				ln := strings.ToLower(n)
				if seen[ln]++; seen[ln] > 1 {
					t.Errorf("lower=%v stream=%q: header %q written twice: %v", lower, stream, ln, names)
				}
				if !want[ln] {
					continue
				}
				delete(want, ln)
				if lower && n != ln {
					t.Errorf("lower=%v stream=%q: header %q is not lowercase", lower, stream, n)
				}
				if !lower && n == ln {
					t.Errorf("lower=%v stream=%q: header %q is not canonical", lower, stream, n)
				}
			}
			if len(want) != 0 {
				t.Errorf("lower=%v stream=%q: missing headers %v in %v", lower, stream, want, names)
			}
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
