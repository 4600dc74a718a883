//go:build ignore

// upload measures large request bodies through probegate binaries side by
// side: CPU per request of each proxy process (the sum of its threads'
// run time, /proc/PID/task/*/schedstat) and the client's latency, for
// bodies of 64 KiB, 1 MiB and 12 MiB to a backend that reads them at full
// speed and to one that reads them at -slow bytes/s. Each binary runs as
// its own proxy per backend (least_inflight, one backend); the cells
// alternate the binaries, their order flipping every round.
//
//	go run upload.go -bin old=/tmp/pg-old -bin new=/tmp/pg-new -rounds 11 -warm-large > out.tsv
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

type binFlag []string

func (b *binFlag) String() string     { return strings.Join(*b, ",") }
func (b *binFlag) Set(s string) error { *b = append(*b, s); return nil }

func main() {
	var bins binFlag
	flag.Var(&bins, "bin", "NAME=PATH of a probegate binary (repeat)")
	rounds := flag.Int("rounds", 7, "rounds")
	slow := flag.Int("slow", 16<<20, "the slow backend's read rate, bytes/s")
	only := flag.String("only", "", "run only this cell, MODE/SIZE (slow/12MiB)")
	warmLarge := flag.Bool("warm-large", false, "warm each proxy up with two requests of the largest body too (its buffers grown before the measure)")
	pause := flag.Duration("pause", 0, "wait this long after starting the proxies (to attach a tracer to them)")
	flag.Parse()

	fast := backend(0)
	slowURL := backend(*slow)
	type proxy struct {
		name, mode, url, admin string
		pid                    int
	}
	var procs []*exec.Cmd
	stop := func() {
		for _, c := range procs {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
		procs = nil
	}
	defer stop()
	var names []string
	for _, b := range bins {
		name, _, _ := strings.Cut(b, "=")
		names = append(names, name)
	}
	// start runs every binary as a proxy in front of each backend, fresh
	// processes each round: a process's heap history (its GC pacing) is
	// not carried from one round to the next.
	start := func() map[string]*proxy {
		proxies := map[string]*proxy{}
		for _, b := range bins {
			name, path, _ := strings.Cut(b, "=")
			for mode, up := range map[string]string{"fast": fast, "slow": slowURL} {
				ln := freePort()
				admin := freePort()
				dir, _ := os.MkdirTemp("", "upload")
				cfg := filepath.Join(dir, "config.yaml")
				os.WriteFile(cfg, []byte(fmt.Sprintf("server:\n  listen: %q\n  admin_listen: %q\nbackends:\n  static: [%q]\nroute:\n  policy: least_inflight\nlog:\n  access: false\n  level: warn\n", ln, admin, up)), 0o644)
				c := exec.Command(path, "-config", cfg)
				c.Stderr = os.Stderr
				if err := c.Start(); err != nil {
					panic(err)
				}
				procs = append(procs, c)
				proxies[name+"/"+mode] = &proxy{name: name, mode: mode, url: "http://" + ln + "/v1/completions", admin: "http://" + admin + "/metrics", pid: c.Process.Pid}
				waitUp(ln)
			}
		}
		return proxies
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	sizes := []struct {
		name       string
		size       int
		fast, slow int // requests per batch
	}{
		{"64KiB", 64 << 10, 400, 200},
		{"1MiB", 1 << 20, 100, 20},
		{"12MiB", 12 << 20, 24, 4},
	}
	bodies := map[int][]byte{}
	for _, s := range sizes {
		bodies[s.size] = body(s.size)
	}
	fmt.Println("round\tbin\tmode\tsize\treqs\tcpu_us_per_req\tlat_p50_ms\tlat_p90_ms\tlat_max_ms\tgcs_per_req")
	for r := 1; r <= *rounds; r++ {
		stop()
		proxies := start()
		for k, p := range proxies {
			fmt.Fprintf(os.Stderr, "round %d: %s pid %d\n", r, k, p.pid)
		}
		time.Sleep(*pause)
		for _, p := range proxies { // warm-up
			for range 3 {
				do(client, p.url, bodies[64<<10])
			}
			if *warmLarge {
				for range 2 {
					do(client, p.url, bodies[sizes[len(sizes)-1].size])
				}
			}
		}
		order := append([]string(nil), names...)
		if r%2 == 0 {
			for i, j := 0, len(order)-1; i < j; i, j = i+1, j-1 {
				order[i], order[j] = order[j], order[i]
			}
		}
		for _, mode := range []string{"fast", "slow"} {
			for _, s := range sizes {
				if *only != "" && *only != mode+"/"+s.name {
					continue
				}
				n := s.fast
				if mode == "slow" {
					n = s.slow
				}
				for _, name := range order {
					p := proxies[name+"/"+mode]
					gc0 := gcs(client, p.admin)
					before := cpuNs(p.pid)
					lat := make([]float64, 0, n)
					for range n {
						t0 := time.Now()
						do(client, p.url, bodies[s.size])
						lat = append(lat, float64(time.Since(t0).Microseconds())/1e3)
					}
					cpu := float64(cpuNs(p.pid)-before) / 1e3 / float64(n)
					gc := (gcs(client, p.admin) - gc0) / float64(n)
					sort.Float64s(lat)
					fmt.Printf("%d\t%s\t%s\t%s\t%d\t%.1f\t%.2f\t%.2f\t%.2f\t%.2f\n", r, name, mode, s.name, n, cpu,
						lat[len(lat)/2], lat[len(lat)*9/10], lat[len(lat)-1], gc)
				}
			}
		}
	}
}

// body is a completion request of exactly size bytes.
func body(size int) []byte {
	head := []byte(`{"model":"m","max_tokens":1,"prompt":"`)
	tail := []byte(`"}`)
	b := append(head, bytes.Repeat([]byte("x"), size-len(head)-len(tail))...)
	return append(b, tail...)
}

func do(c *http.Client, url string, b []byte) {
	resp, err := c.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		panic(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		panic(fmt.Sprintf("status %d", resp.StatusCode))
	}
}

// backend serves a backend reading each request body at rate bytes/s (0:
// at full speed) and answering a small JSON; it returns its URL.
func backend(rate int) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rate == 0 {
			_, _ = io.Copy(io.Discard, r.Body)
		} else {
			buf := make([]byte, 64<<10)
			start, got := time.Now(), 0
			for {
				n, err := r.Body.Read(buf)
				got += n
				if err != nil {
					break
				}
				if ahead := time.Duration(float64(got)/float64(rate)*1e9) - time.Since(start); ahead > 0 {
					time.Sleep(ahead)
				}
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"x","object":"text_completion","choices":[{"text":"ok"}]}`)
	}))
	return "http://" + ln.Addr().String()
}

func freePort() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitUp(addr string) {
	for range 200 {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	panic("proxy did not start on " + addr)
}

// gcs is the proxy's completed GC cycles (go_gc_duration_seconds_count on
// its admin listener).
func gcs(c *http.Client, url string) float64 {
	resp, err := c.Get(url)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "go_gc_duration_seconds_count ") {
			v, _ := strconv.ParseFloat(strings.Fields(l)[1], 64)
			return v
		}
	}
	return -1
}

// cpuNs is the run time of every thread of process pid, in ns.
func cpuNs(pid int) int64 {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var sum int64
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		v, _ := strconv.ParseInt(strings.Fields(string(b))[0], 10, 64)
		sum += v
	}
	return sum
}
