package route

import (
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/probe"
)

// decisionSources lists the source labels of probegate_decisions_total.
func (tp *testProxy) decisionSources(t *testing.T) []string {
	t.Helper()
	mfs, err := tp.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if mf.GetName() != "probegate_decisions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "source" {
					out = append(out, lp.GetValue())
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

type trueViews struct{}

func (trueViews) View(*Backend, time.Time, time.Duration) probe.View {
	return probe.View{Source: probe.SourceOracle}
}

// A production proxy exports the decision sources an operator can see
// (DESIGN.md's four and none for blind policies), never the benchmark's
// oracle; a proxy given a view source counts its decisions as oracle.
func TestDecisionSourcesExported(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, `{"id":"x"}`) })
	tp := startProxy(t, testConfig(up.URL))
	if got, want := tp.decisionSources(t), []string{"local", "none", "orca", "probe", "scrape"}; !slices.Equal(got, want) {
		t.Fatalf("production decision sources %v, want %v", got, want)
	}

	cfg := testConfig(up.URL)
	cfg.Route.Policy = config.PolicyCached
	tp = startProxy(t, cfg, func(o *Options) { o.Views = trueViews{} })
	resp := post(t, tp.url("/v1/completions"), `{"model":"m","prompt":"hi"}`)
	resp.Body.Close()
	if got := tp.counter(t, "probegate_decisions_total", map[string]string{"source": "oracle"}); got != 1 {
		t.Fatalf("oracle decisions = %v, want 1 (sources %v)", got, tp.decisionSources(t))
	}
}
