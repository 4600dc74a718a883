package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestBadFlags(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-n", "0"}, "-n: must be >= 1"},
		{[]string{"-fail-rate", "2"}, "-fail-rate: must be in [0,1]"},
		{[]string{"-time-scale", "0"}, "-time-scale: must be > 0"},
		{[]string{"-slowdown", "0.5"}, "-slowdown: must be >= 1"},
		{[]string{"-lora", "a,,b"}, "-lora: empty adapter name"},
		{[]string{"-port", "65535", "-n", "2"}, "-port: 65535..65536"},
		{[]string{"-nope"}, "flag provided but not defined"},
		{[]string{"extra"}, "unexpected arguments"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(context.Background(), tc.args, &out, &errb); code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if !strings.Contains(errb.String(), tc.want) {
				t.Errorf("stderr %q lacks %q", errb.String(), tc.want)
			}
		})
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestServesUntilStopped(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	var out, errb syncBuffer
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"-n", "2", "-port", "0", "-lora", "a,b", "-time-scale", "0.1"}, &out, &errb)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for strings.Count(out.String(), "serving") < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("not serving: %q %q", out.String(), errb.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		url := line[strings.LastIndex(line, " ")+1:]
		tr := &http.Transport{}
		resp, err := (&http.Client{Transport: tr}).Get(url + "/health")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s/health: %v", url, err)
		}
		resp.Body.Close()
		tr.CloseIdleConnections()
		wireHeaderNamesAreLowercase(t, url)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("exit %d", code)
	}
}

// wireHeaderNamesAreLowercase reads a completion's raw answer: by default
// the servers write header names as uvicorn does, in lowercase.
func wireHeaderNamesAreLowercase(t *testing.T, url string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(url, "http://"), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	body := `{"model":"a","prompt":"hi","max_tokens":1}`
	if _, err := io.WriteString(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: "+
		strconv.Itoa(len(body))+"\r\n\r\n"+body); err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(c)
	head, _, _ := strings.Cut(string(raw), "\r\n\r\n")
	if !strings.HasPrefix(head, "HTTP/1.1 200") || !strings.Contains(head, "\r\ncontent-type: ") || strings.Contains(head, "Content-Type") {
		t.Fatalf("want a 200 with lowercase header names, got %q", head)
	}
}
