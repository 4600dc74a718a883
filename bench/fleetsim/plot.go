package fleetsim

import (
	"errors"
	"fmt"
	"image/color"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/probegate/probegate/bench"
)

// colors gives each strategy the colour the bench's plots give it.
var colors = map[string]color.RGBA{
	bench.RoundRobin:     {R: 0x99, G: 0x99, B: 0x99, A: 0xff},
	bench.LeastInflight:  {R: 0x22, G: 0x88, B: 0x22, A: 0xff},
	bench.Cached:         {R: 0x1f, G: 0x4e, B: 0xb4, A: 0xff},
	bench.CachedAdaptive: {R: 0x66, G: 0x99, B: 0xee, A: 0xff},
	bench.Probe:          {R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	bench.Oracle:         {R: 0x00, G: 0x00, B: 0x00, A: 0xff},
}

// WritePlots writes the SVG plots to dir: p99 TTFT over the oracle's against
// R at the largest fleet, the herd index against R there, and the pod-side
// load-report requests against QPS per pod (the crossover series).
func WritePlots(r *Results, dir string) error {
	maxN := 0
	for _, sc := range r.Scenarios {
		if !strings.Contains(sc.Name, "_") || strings.HasPrefix(sc.Name, "crossover") || strings.HasPrefix(sc.Name, "headline") {
			continue
		}
		maxN = max(maxN, sc.Params.Pods)
	}
	var errs []error
	for _, load := range []float64{0.8, 0.95} {
		errs = append(errs,
			plotVsR(r, dir, maxN, load, "ratio", "p99 TTFT / oracle's", func(s *StrategyResult) float64 { return s.TTFTP99RatioToOracle }),
			plotVsR(r, dir, maxN, load, "herd", "herd index (busiest pod per 100 ms / fair share, mean over windows)", func(s *StrategyResult) float64 { return s.HerdMean }))
	}
	errs = append(errs, plotCrossover(r, dir))
	return errors.Join(errs...)
}

// plotVsR plots y against the replica count for the grid scenarios of the
// first workload with pods pods at load.
func plotVsR(r *Results, dir string, pods int, load float64, file, ylabel string, y func(*StrategyResult) float64) error {
	series := map[string]plotter.XYs{}
	var order []string
	workload := ""
	for _, sc := range r.Scenarios {
		p := sc.Params
		if strings.HasPrefix(sc.Name, "crossover") || strings.HasPrefix(sc.Name, "headline") || p.Pods != pods || p.Load != load {
			continue
		}
		if workload == "" {
			workload = p.Workload
		}
		if p.Workload != workload {
			continue
		}
		for i := range sc.Strategies {
			s := &sc.Strategies[i]
			if _, ok := series[s.Name]; !ok {
				order = append(order, s.Name)
			}
			series[s.Name] = append(series[s.Name], plotter.XY{X: float64(p.Replicas), Y: y(s)})
		}
	}
	if len(order) == 0 {
		return nil
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s, %d pods, %.2fx load: %s against replicas", workload, pods, load, file)
	p.X.Label.Text = "proxy replicas R"
	p.Y.Label.Text = ylabel
	p.Legend.Top, p.Legend.Left = true, true
	for _, name := range order {
		pts := series[name]
		slices.SortFunc(pts, func(a, b plotter.XY) int { return int(a.X - b.X) })
		if err := addLine(p, pts, name, name); err != nil {
			return err
		}
	}
	p.Add(plotter.NewGrid())
	return p.Save(7*vg.Inch, 4.5*vg.Inch, filepath.Join(dir, fmt.Sprintf("%s_vs_r_n%d_load%02.0f.svg", file, pods, load*100)))
}

// plotCrossover plots each pod's load-report requests per second (probes
// plus scrapes) against the QPS it serves, one line per strategy and
// replica count of the crossover series.
func plotCrossover(r *Results, dir string) error {
	series := map[string]plotter.XYs{}
	var order []string
	for _, sc := range r.Scenarios {
		if !strings.HasPrefix(sc.Name, "crossover") {
			continue
		}
		for _, s := range sc.Strategies {
			key := fmt.Sprintf("%s R=%d", s.Name, sc.Params.Replicas)
			if _, ok := series[key]; !ok {
				order = append(order, key)
			}
			series[key] = append(series[key], plotter.XY{X: s.QPSPerPod, Y: s.PodProbesPerS + s.PodScrapesPerS})
		}
	}
	if len(order) == 0 {
		return nil
	}
	p := plot.New()
	p.Title.Text = "pod-side load reports: probes + scrapes per pod per second"
	p.X.Label.Text = "requests per pod per second"
	p.Y.Label.Text = "load-report requests per pod per second (log)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true
	for _, key := range order {
		name, _, _ := strings.Cut(key, " ")
		pts := series[key]
		for i := range pts {
			pts[i].Y = max(pts[i].Y, 0.01)
		}
		if err := addLine(p, pts, name, key); err != nil {
			return err
		}
	}
	p.Add(plotter.NewGrid())
	return p.Save(7*vg.Inch, 4.5*vg.Inch, filepath.Join(dir, "pod_reports_vs_qps.svg"))
}

func addLine(p *plot.Plot, pts plotter.XYs, strategy, label string) error {
	l, sc, err := plotter.NewLinePoints(pts)
	if err != nil {
		return err
	}
	c := colors[strategy]
	l.Color, sc.Color = c, c
	l.Width = vg.Points(1.5)
	sc.Shape = draw.CircleGlyph{}
	if strings.HasSuffix(label, "R=1") {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	}
	if strategy == bench.Oracle {
		l.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
	}
	p.Add(l, sc)
	p.Legend.Add(label, l, sc)
	return nil
}
