package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// profileDuring records a CPU profile and an allocation profile (the
// allocations made during the window, not since start) of a probegate
// child from its admin listener's /debug/pprof/, over the next d, into
// dir/NAME.cpu.pprof and dir/NAME.allocs.pprof. It runs in the background;
// the returned function waits for it and returns the first error. Read
// them with `go tool pprof -top FILE` (see bench/README.md).
func profileDuring(ctx context.Context, admin, dir, name string, d time.Duration) func() error {
	secs := strconv.Itoa(max(int(d.Seconds()), 1))
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	get := func(kind, query string) {
		defer wg.Done()
		err := fetchProfile(ctx, "http://"+admin+"/debug/pprof/"+query, filepath.Join(dir, name+"."+kind+".pprof"), d+10*time.Second)
		if err != nil {
			mu.Lock()
			if first == nil {
				first = fmt.Errorf("%s profile of %s: %w", kind, name, err)
			}
			mu.Unlock()
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return func() error { return err }
	}
	wg.Add(2)
	go get("cpu", "profile?seconds="+secs)
	go get("allocs", "allocs?seconds="+secs)
	return func() error {
		wg.Wait()
		return first
	}
}

func fetchProfile(ctx context.Context, url, path string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
