package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/probegate/probegate/internal/vllmsim"
)

// alertThreshold splits an alert expression "LHS OP NUMBER" into its
// measured side and the comparison: every alert in deploy/prometheus is
// written that way so that the measured side can be shown to return data
// while the alert itself (rightly) does not fire on a healthy fleet.
var alertThreshold = regexp.MustCompile(`(?s)^(.*?)\s*(==|!=|>=|<=|>|<)\s*[0-9.]+\s*$`)

// TestOperatorDashboardAndRules starts a real Prometheus on loopback
// scraping a live proxy in front of a simulated fleet under load, then runs
// every Grafana panel query and every rule expression of deploy/ through
// Prometheus' HTTP API and requires each to return data, so that no
// misspelled metric or label can ship. It also runs promtool's rule check
// and the alerts' unit tests. Skipped when the binaries are absent
// (.ci/run installs Debian's prometheus package).
func TestOperatorDashboardAndRules(t *testing.T) {
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus not on PATH: skipping the dashboard/rules proof (apt-get install prometheus; .ci/run does)")
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not on PATH: skipping the dashboard/rules proof (apt-get install prometheus; .ci/run does)")
	}
	rulesPath, err := filepath.Abs("deploy/prometheus/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests, _ := filepath.Glob("deploy/prometheus/tests/*.yaml")
	if len(tests) == 0 {
		t.Fatal("no promtool unit tests under deploy/prometheus/tests")
	}
	for _, args := range [][]string{{"check", "rules", rulesPath}, append([]string{"test", "rules"}, tests...)} {
		if out, err := exec.Command(promtool, args...).CombinedOutput(); err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args[:2], " "), err, out)
		}
	}
	queries := dashboardQueries(t, "deploy/grafana-dashboard.json")
	ruleQueries, alerts := ruleExpressions(t, rulesPath)

	// The proxy in front of a simulated fleet, as `probegate -demo` runs it.
	sim := vllmsim.DefaultConfig()
	sim.TimeScale = 0.1
	fleet, err := vllmsim.StartFleet(4, "127.0.0.1", 0, sim)
	if err != nil {
		t.Fatal(err)
	}
	defer fleet.Close()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	writeConfig(t, cfgPath, `"`+strings.Join(fleet.URLs(), `","`)+`"`, "probe")
	addrs, sig, _, exit := startRun(t, cfgPath) // main_signal_test.go
	defer func() {
		sig <- syscall.SIGTERM
		<-exit
	}()

	// Load: closed loops of short completions, streamed and not, until the
	// queries are done.
	ctx, stopLoad := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { stopLoad(); wg.Wait() }()
	client := &http.Client{Timeout: 10 * time.Second}
	for i := range 6 {
		wg.Go(func() {
			body := fmt.Sprintf(`{"model":%q,"prompt":"hello %d","max_tokens":8,"stream":%v}`, sim.Model, i, i%2 == 0)
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+addrs[0]+"/v1/completions", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				if resp, err := client.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		})
	}

	prom := startPrometheus(t, promBin, dir, addrs[1], rulesPath)

	// Two scrapes at least (rates need two samples), and the recording
	// rules evaluated on them.
	waitForData(t, prom, `count_over_time(up{job="probegate"}[5m]) >= 3`, 30*time.Second)

	all := append(append([]string(nil), queries...), ruleQueries...)
	for _, a := range alerts {
		m := alertThreshold.FindStringSubmatch(a)
		if m == nil {
			t.Errorf("alert expression %q is not \"measured OP threshold\"", a)
			continue
		}
		all = append(all, m[1])
		if _, err := query(prom, a); err != nil { // the whole alert must at least evaluate
			t.Errorf("alert expression %q: %v", a, err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	pending := all
	for len(pending) > 0 && time.Now().Before(deadline) {
		var still []string
		for _, q := range pending {
			n, err := query(prom, q)
			if err != nil {
				t.Fatalf("query %q: %v", q, err)
			}
			if n == 0 {
				still = append(still, q)
			}
		}
		pending = still
		if len(pending) > 0 {
			time.Sleep(500 * time.Millisecond)
		}
	}
	for _, q := range pending {
		t.Errorf("no data from a live proxy under load for:\n  %s", q)
	}
	ruleHealth(t, prom)
	if t.Failed() {
		return
	}
	t.Logf("verified %d dashboard queries, %d recording-rule expressions and recorded series, %d alert expressions against Prometheus; promtool check and %d alert unit-test files pass",
		len(queries), len(ruleQueries), len(alerts), len(tests))
}

// dashboardQueries returns every target expression of every panel, with
// Grafana's $__rate_interval set to a window that holds several scrapes.
func dashboardQueries(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			out = append(out, strings.ReplaceAll(tg.Expr, "$__rate_interval", "30s"))
		}
	}
	return out
}

// ruleExpressions returns the recording rules' expressions and the names
// they record (both must return data), and the alerts' expressions.
func ruleExpressions(t *testing.T, path string) (records, alerts []string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct{ Record, Alert, Expr string }
		}
	}
	if err := yaml.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				records = append(records, r.Expr, r.Record)
			} else {
				alerts = append(alerts, r.Expr)
			}
		}
	}
	return records, alerts
}

// startPrometheus runs Prometheus on a free loopback port, scraping the
// admin listener every second as job "probegate", with the rules loaded.
func startPrometheus(t *testing.T, bin, dir, target, rules string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: probegate
    static_configs:
      - targets: [%q]
`, rules, target)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	out := &syncBuf{}
	cmd := exec.Command(bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	base := "http://" + addr
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := http.Get(base + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready in 30s:\n%s", out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// query runs an instant query and returns how many series or samples it
// returned; an error is a bad query (Prometheus rejected it).
func query(base, q string) (int, error) {
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string
		Error  string
		Data   struct {
			ResultType string
			Result     json.RawMessage
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, err
	}
	if r.Status != "success" {
		return 0, fmt.Errorf("%s", r.Error)
	}
	switch r.Data.ResultType {
	case "vector", "matrix":
		var v []json.RawMessage
		if err := json.Unmarshal(r.Data.Result, &v); err != nil {
			return 0, err
		}
		return len(v), nil
	default: // scalar or string: a value
		return 1, nil
	}
}

// waitForData polls until q returns data.
func waitForData(t *testing.T, base, q string, d time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(d); ; {
		if n, err := query(base, q); err != nil {
			t.Fatalf("query %q: %v", q, err)
		} else if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q returned nothing within %v", q, d)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ruleHealth requires every loaded rule to have evaluated without error.
func ruleHealth(t *testing.T, base string) {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/rules")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			Groups []struct {
				Rules []struct{ Name, Health, LastError string }
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range r.Data.Groups {
		for _, rule := range g.Rules {
			n++
			if rule.Health != "ok" {
				t.Errorf("rule %s: health %q %s", rule.Name, rule.Health, rule.LastError)
			}
		}
	}
	if n == 0 {
		t.Error("Prometheus loaded no rules")
	}
}
