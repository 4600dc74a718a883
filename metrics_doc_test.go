package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/internal/vllmsim"
	"github.com/probegate/probegate/route"
)

// readmeMetric is one row of README.md's Metrics table.
type readmeMetric struct {
	labels []string // sorted
	kind   string   // counter, gauge, histogram
	text   string   // the row's meaning column
}

var (
	readmeMetricRow = regexp.MustCompile("^\\| `(probegate_[a-z_]+)(?:\\{([a-z_,]+)\\})?` \\| ([a-z]+) \\| (.*) \\|$")
	descName        = regexp.MustCompile(`fqName: "([^"]+)"`)
	descLabels      = regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
)

// unboundedLabels are the labels whose values are not an enum the docs
// can list: backends (from discovery) and HTTP status codes.
var unboundedLabels = map[string]bool{"backend": true, "code": true}

// TestEveryMetricIsDocumented holds README.md's Metrics table to what the
// proxy exports, in both directions, because dashboards, alerts and
// operators are built on those names (DESIGN.md's metric contract).
//
// It runs the proxy as `probegate -config` does, in front of a simulated
// fleet, sends a few requests and reads the admin listener's /metrics; it
// also registers route.New's collectors with a recorder, so that a family
// with no series yet (a per-backend vector before its first 5xx) counts
// too. Then:
//   - every probegate_* family is a row of the table with the same labels,
//     and, when it has series, the same type;
//   - every row is a family the proxy registers;
//   - every value an enum label (any label but backend and code) takes on
//     /metrics is named in the family's row and in its HELP, so neither an
//     operator reading the table nor one reading /metrics meets a series
//     nobody explained.
func TestEveryMetricIsDocumented(t *testing.T) {
	rows := readmeMetrics(t)

	// The families route.New registers, with their labels, series or not.
	rec := &descRecorder{labels: map[string][]string{}}
	cfg := config.Default()
	cfg.Backends.Static = []string{"http://127.0.0.1:1"}
	p, err := route.New(route.Options{Config: cfg, Registerer: rec})
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	if len(rec.labels) < 10 {
		t.Fatalf("recorded %d families from route.New: the recorder missed its collectors", len(rec.labels))
	}

	// The families a running proxy exports, with their types and series.
	families := scrapeRunningProxy(t)
	exported := map[string][]string{}
	for name, mf := range families {
		if !strings.HasPrefix(name, "probegate_") {
			continue
		}
		var labels []string
		if len(mf.GetMetric()) > 0 {
			for _, lp := range mf.GetMetric()[0].GetLabel() {
				labels = append(labels, lp.GetName())
			}
		}
		slices.Sort(labels)
		exported[name] = labels
	}
	for name, labels := range rec.labels {
		if l, ok := exported[name]; ok && len(l) > 0 && !slices.Equal(l, labels) {
			t.Errorf("%s: registered with labels %v but exported with %v", name, labels, l)
		}
		exported[name] = labels
	}

	for name, labels := range exported {
		row, ok := rows[name]
		if !ok {
			t.Errorf("%s{%s} is exported but has no row in README.md's Metrics table", name, strings.Join(labels, ","))
			continue
		}
		if !slices.Equal(row.labels, labels) {
			t.Errorf("%s: README.md lists labels %v, the proxy exports %v", name, row.labels, labels)
		}
		mf, ok := families[name]
		if !ok {
			continue // no series yet: the type is not on /metrics
		}
		if kind := strings.ToLower(mf.GetType().String()); kind != row.kind {
			t.Errorf("%s: README.md says %s, /metrics says %s", name, row.kind, kind)
		}
		seen := map[string]bool{}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				v := lp.GetValue()
				if unboundedLabels[lp.GetName()] || seen[lp.GetName()+"="+v] {
					continue
				}
				seen[lp.GetName()+"="+v] = true
				if !strings.Contains(row.text, "`"+v+"`") {
					t.Errorf("%s{%s=%q} is exported but README.md's row does not name `%s`", name, lp.GetName(), v, v)
				}
				if !regexp.MustCompile(`\b` + regexp.QuoteMeta(v) + `\b`).MatchString(mf.GetHelp()) {
					t.Errorf("%s{%s=%q} is exported but its HELP does not name %s: %q", name, lp.GetName(), v, v, mf.GetHelp())
				}
			}
		}
	}
	for name := range rows {
		if _, ok := exported[name]; !ok {
			t.Errorf("README.md documents %s, which the proxy does not export", name)
		}
	}
}

// readmeMetrics parses the rows of README.md's Metrics table.
func readmeMetrics(t *testing.T) map[string]readmeMetric {
	t.Helper()
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## Metrics\n")
	if !ok {
		t.Fatal("README.md has no ## Metrics section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	rows := map[string]readmeMetric{}
	for line := range strings.Lines(section) {
		line = strings.TrimRight(line, "\n")
		if !strings.HasPrefix(line, "| `probegate_") {
			continue
		}
		m := readmeMetricRow.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("README.md's Metrics row is not \"| `name{labels}` | type | meaning |\": %s", line)
		}
		var labels []string
		if m[2] != "" {
			labels = strings.Split(m[2], ",")
			slices.Sort(labels)
		}
		if _, dup := rows[m[1]]; dup {
			t.Errorf("README.md lists %s twice", m[1])
		}
		rows[m[1]] = readmeMetric{labels: labels, kind: m[3], text: m[4]}
	}
	if len(rows) < 10 {
		t.Fatalf("found %d rows in README.md's Metrics table: the parser does not match its format", len(rows))
	}
	return rows
}

// scrapeRunningProxy runs the proxy in front of a 2-pod simulated fleet,
// sends a plain and a streamed completion, and returns its /metrics.
func scrapeRunningProxy(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	sim := vllmsim.DefaultConfig()
	sim.TimeScale = 0.05
	fleet, err := vllmsim.StartFleet(2, "127.0.0.1", 0, sim)
	if err != nil {
		t.Fatal(err)
	}
	defer fleet.Close()
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	writeConfig(t, cfgPath, `"`+strings.Join(fleet.URLs(), `","`)+`"`, "probe")
	addrs, sig, _, exit := startRun(t, cfgPath) // main_signal_test.go
	defer func() {
		sig <- syscall.SIGTERM
		<-exit
	}()
	client := &http.Client{Timeout: 10 * time.Second}
	for _, stream := range []bool{false, true} {
		body := fmt.Sprintf(`{"model":%q,"prompt":"hello","max_tokens":4,"stream":%v}`, sim.Model, stream)
		resp, err := client.Post("http://"+addrs[0]+"/v1/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("completion (stream %v): %d", stream, resp.StatusCode)
		}
	}
	resp, err := client.Get("http://" + addrs[1] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return families
}

// descRecorder is a prometheus.Registerer that records each collector's
// family names and variable labels from its descriptors.
type descRecorder struct {
	labels map[string][]string
}

func (r *descRecorder) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	var err error
	for d := range ch {
		s := d.String()
		name := descName.FindStringSubmatch(s)
		labels := descLabels.FindStringSubmatch(s)
		if name == nil || labels == nil {
			err = fmt.Errorf("descriptor not understood: %s", s)
			continue // drain: Describe must not block
		}
		var ls []string
		if labels[1] != "" {
			ls = strings.Split(labels[1], ",")
			slices.Sort(ls)
		}
		r.labels[name[1]] = ls
	}
	return err
}

func (r *descRecorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *descRecorder) Unregister(prometheus.Collector) bool { return true }
