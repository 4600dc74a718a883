package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// probeCounts are a probegate target's probe and request counters, read
// from its admin listener's /metrics.
type probeCounts struct {
	sent      float64 // ok + timeout + error + cancelled
	timeouts  float64 // outcome timeout: no answer by probe.deadline
	coalesced float64
	requests  float64
	gcCycles  float64 // go_gc_duration_seconds_count: the Go runtime's collections
}

// minus returns the counts accrued since earlier.
func (c probeCounts) minus(earlier probeCounts) probeCounts {
	return probeCounts{
		sent:      c.sent - earlier.sent,
		timeouts:  c.timeouts - earlier.timeouts,
		coalesced: c.coalesced - earlier.coalesced,
		requests:  c.requests - earlier.requests,
		gcCycles:  c.gcCycles - earlier.gcCycles,
	}
}

// readProbeCounts scrapes admin's /metrics for probegate_probes_total by
// outcome, probegate_requests_total (all labels summed) and the Go
// runtime's go_gc_duration_seconds_count.
func readProbeCounts(ctx context.Context, admin string) (probeCounts, error) {
	var c probeCounts
	err := scrapeAdmin(ctx, admin, 5*time.Second, func(sc *bufio.Scanner) (err error) {
		c, err = parseProbeCounts(sc)
		return err
	})
	return c, err
}

// scrapeAdmin GETs the /metrics of a probegate admin listener within
// timeout and hands parse a scanner over the exposition; a status other
// than 200 is an error.
func scrapeAdmin(ctx context.Context, admin string, timeout time.Duration, parse func(*bufio.Scanner) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/metrics", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/metrics: status %d", resp.StatusCode)
	}
	return parse(bufio.NewScanner(resp.Body))
}

func parseProbeCounts(sc *bufio.Scanner) (probeCounts, error) {
	var c probeCounts
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "go_gc_duration_seconds_count "); ok {
			if n, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
				c.gcCycles = n
			}
			continue
		}
		name, rest, ok := strings.Cut(line, "{")
		if !ok {
			continue
		}
		labels, val, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			continue
		}
		switch name {
		case "probegate_requests_total":
			c.requests += v
		case "probegate_probes_total":
			switch {
			case strings.Contains(labels, `outcome="coalesced"`):
				c.coalesced += v
			case strings.Contains(labels, `outcome="timeout"`):
				c.sent += v
				c.timeouts += v
			case strings.Contains(labels, `outcome="ok"`),
				strings.Contains(labels, `outcome="error"`), strings.Contains(labels, `outcome="cancelled"`):
				c.sent += v
			}
		}
	}
	return c, sc.Err()
}
