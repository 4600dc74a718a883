package bench

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// strategyColors gives each strategy a fixed colour across plots.
var strategyColors = map[string]color.RGBA{
	RoundRobin:     {R: 0x99, G: 0x99, B: 0x99, A: 0xff},
	Random:         {R: 0xbb, G: 0x88, B: 0x44, A: 0xff},
	LeastInflight:  {R: 0x22, G: 0x88, B: 0x22, A: 0xff},
	Cached:         {R: 0x1f, G: 0x4e, B: 0xb4, A: 0xff},
	CachedAdaptive: {R: 0x66, G: 0x99, B: 0xee, A: 0xff},
	Probe:          {R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	ProbeNoHedge:   {R: 0xee, G: 0x88, B: 0x66, A: 0xff},
	Oracle:         {R: 0x00, G: 0x00, B: 0x00, A: 0xff},
}

func styleLine(l *plotter.Line, name string) {
	l.Color = strategyColors[name]
	l.Width = vg.Points(1.5)
	if name == Oracle {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	}
}

// WritePlots writes SVG plots to dir: the TTFT CDF of every scenario (one
// line per strategy), p99 TTFT against offered load for ramp, and p99 TTFT
// against the number of replicas.
func WritePlots(r *Results, dir string) error {
	var errs []error
	for i := range r.Scenarios {
		errs = append(errs, plotCDF(&r.Scenarios[i], dir))
	}
	for i := range r.Scenarios {
		if r.Scenarios[i].Name == "ramp" {
			errs = append(errs, plotRamp(&r.Scenarios[i], rampCapacity(&r.Fleet), dir))
		}
	}
	errs = append(errs, plotReplicas(r, dir))
	return errors.Join(errs...)
}

func plotCDF(sc *ScenarioResult, dir string) error {
	p := plot.New()
	p.Title.Text = "TTFT CDF: " + sc.Name
	p.X.Label.Text = "TTFT (ms, log scale)"
	p.Y.Label.Text = "fraction of requests"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top = false
	p.Legend.Left = false
	p.Y.Min, p.Y.Max = 0, 1
	lines := 0
	for _, s := range sc.Strategies {
		xs := slices.Clone(s.ttftSamples)
		if len(xs) == 0 {
			continue
		}
		slices.Sort(xs)
		// At most ~400 points per line: every k-th sample plus the tail.
		k := max(1, len(xs)/400)
		var pts plotter.XYs
		for i := 0; i < len(xs); i += k {
			pts = append(pts, plotter.XY{X: math.Max(xs[i], 0.1), Y: float64(i+1) / float64(len(xs))})
		}
		pts = append(pts, plotter.XY{X: math.Max(xs[len(xs)-1], 0.1), Y: 1})
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		styleLine(l, s.Name)
		p.Add(l)
		p.Legend.Add(s.Name, l)
		lines++
	}
	if lines == 0 {
		return nil
	}
	p.Add(plotter.NewGrid())
	return p.Save(7*vg.Inch, 4.5*vg.Inch, filepath.Join(dir, "ttft_cdf_"+sc.Name+".svg"))
}

func plotRamp(sc *ScenarioResult, capacity float64, dir string) error {
	p := plot.New()
	p.Title.Text = "ramp: p99 TTFT against offered load"
	p.X.Label.Text = fmt.Sprintf("offered load (x capacity, %.0f req/s)", capacity)
	p.Y.Label.Text = "p99 TTFT (ms)"
	p.Legend.Top, p.Legend.Left = true, true
	for _, s := range sc.Strategies {
		var pts plotter.XYs
		for _, st := range s.Steps {
			pts = append(pts, plotter.XY{X: st.Load, Y: st.TTFT.P99})
		}
		if len(pts) == 0 {
			continue
		}
		if err := addLinePoints(p, pts, s.Name); err != nil {
			return err
		}
	}
	p.Add(plotter.NewGrid())
	return p.Save(7*vg.Inch, 4.5*vg.Inch, filepath.Join(dir, "ramp_p99.svg"))
}

func plotReplicas(r *Results, dir string) error {
	byStrategy := map[string]plotter.XYs{}
	var order []string
	for _, sc := range r.Scenarios {
		rs, ok := strings.CutPrefix(sc.Name, "replicas_r")
		if !ok {
			continue
		}
		var rep float64
		if _, err := fmt.Sscanf(rs, "%g", &rep); err != nil {
			continue
		}
		for _, s := range sc.Strategies {
			if _, ok := byStrategy[s.Name]; !ok {
				order = append(order, s.Name)
			}
			byStrategy[s.Name] = append(byStrategy[s.Name], plotter.XY{X: rep, Y: s.TTFT.P99})
		}
	}
	if len(order) == 0 {
		return nil
	}
	p := plot.New()
	p.Title.Text = "replicas: p99 TTFT against proxy replicas (same total load)"
	p.X.Label.Text = "proxy replicas R"
	p.Y.Label.Text = "p99 TTFT (ms)"
	p.Legend.Top, p.Legend.Left = true, true
	for _, name := range order {
		if err := addLinePoints(p, byStrategy[name], name); err != nil {
			return err
		}
	}
	p.Add(plotter.NewGrid())
	return p.Save(7*vg.Inch, 4.5*vg.Inch, filepath.Join(dir, "replicas_p99.svg"))
}

func addLinePoints(p *plot.Plot, pts plotter.XYs, name string) error {
	l, sc, err := plotter.NewLinePoints(pts)
	if err != nil {
		return err
	}
	styleLine(l, name)
	sc.Color = strategyColors[name]
	sc.Shape = draw.CircleGlyph{}
	p.Add(l, sc)
	p.Legend.Add(name, l, sc)
	return nil
}

// rampCapacity is the capacity the ramp's loads are multiples of: the
// uniform-size one (ramp always draws uniform sizes).
func rampCapacity(f *FleetInfo) float64 {
	if c, ok := f.CapacityBySizes[SizesUniform]; ok {
		return c
	}
	return f.CapacityRPS
}
