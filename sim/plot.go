package sim

import (
	"fmt"
	"image/color"
	"path/filepath"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// palette gives each scheme a fixed colour across plots.
var palette = map[string]color.RGBA{
	"ecmp": {0x1f, 0x77, 0xb4, 255}, "letflow": {0xff, 0x7f, 0x0e, 255}, "conga": {0x2c, 0xa0, 0x2c, 255},
	"hula": {0xd6, 0x27, 0x28, 255}, "conweave": {0x94, 0x67, 0xbd, 255}, "rdmacell": {0x00, 0x00, 0x00, 255},
	"rdmacell-ecmp": {0x8c, 0x56, 0x4b, 255}, "rdmacell-spray": {0x7f, 0x7f, 0x7f, 255},
}

// PlotFig5 draws, per workload, average and p99 slowdown against load
// with one line per scheme (the layout of the paper's Figure 5) into
// dir/fig5-<workload>-{avg,p99}.png, averaging over seeds. It returns the
// files written.
func PlotFig5(rows []Row, dir string) ([]string, error) {
	type key struct{ wl, scheme string }
	type acc struct{ avg, p99, n float64 }
	pts := map[key]map[float64]*acc{}
	var wls, schemes []string
	seen := map[string]bool{}
	for _, r := range rows {
		if r.Err != nil || r.All.Flows == 0 {
			continue
		}
		k := key{r.Workload.Name, r.Scheme}
		if pts[k] == nil {
			pts[k] = map[float64]*acc{}
		}
		a := pts[k][r.Load]
		if a == nil {
			a = &acc{}
			pts[k][r.Load] = a
		}
		a.avg += r.All.Avg
		a.p99 += r.All.P99
		a.n++
		if !seen["w"+k.wl] {
			seen["w"+k.wl] = true
			wls = append(wls, k.wl)
		}
		if !seen["s"+k.scheme] {
			seen["s"+k.scheme] = true
			schemes = append(schemes, k.scheme)
		}
	}
	var files []string
	for _, wl := range wls {
		for _, metric := range []string{"avg", "p99"} {
			p := plot.New()
			p.Title.Text = fmt.Sprintf("%s: %s FCT slowdown", wl, map[string]string{"avg": "average", "p99": "99th-percentile"}[metric])
			p.X.Label.Text = "load (%)"
			p.Y.Label.Text = "FCT slowdown"
			p.Legend.Top, p.Legend.Left = true, true
			for _, sc := range schemes {
				m := pts[key{wl, sc}]
				if len(m) == 0 {
					continue
				}
				loads := make([]float64, 0, len(m))
				for l := range m {
					loads = append(loads, l)
				}
				sort.Float64s(loads)
				xy := make(plotter.XYs, len(loads))
				for i, l := range loads {
					a := m[l]
					v := a.avg / a.n
					if metric == "p99" {
						v = a.p99 / a.n
					}
					xy[i] = plotter.XY{X: 100 * l, Y: v}
				}
				line, points, err := plotter.NewLinePoints(xy)
				if err != nil {
					return files, fmt.Errorf("plot %s %s: %w", wl, sc, err)
				}
				c := palette[sc]
				line.Color, points.Color = c, c
				line.Width = vg.Points(1.5)
				p.Add(line, points)
				p.Legend.Add(sc, line, points)
			}
			name := filepath.Join(dir, fmt.Sprintf("fig5-%s-%s.png", wl, metric))
			if err := p.Save(6*vg.Inch, 4*vg.Inch, name); err != nil {
				return files, fmt.Errorf("plot: %w", err)
			}
			files = append(files, name)
		}
	}
	return files, nil
}

// PlotCollectives draws, for the collective rows, each scheme's
// completion time over the ideal as grouped bars (one group per
// collective and placement, averaged over seeds) into
// dir/collective.png, and returns the file written.
func PlotCollectives(rows []Row, dir string) (string, error) {
	type acc struct{ sum, n float64 }
	vals := map[string]map[string]*acc{} // scheme → group → slowdown
	var groups, schemes []string
	seen := map[string]bool{}
	for _, r := range rows {
		if r.Collective == nil || r.Err != nil || r.Coll.Slowdown == 0 {
			continue
		}
		g := r.Name()
		if !seen["g"+g] {
			seen["g"+g] = true
			groups = append(groups, g)
		}
		if !seen["s"+r.Scheme] {
			seen["s"+r.Scheme] = true
			schemes = append(schemes, r.Scheme)
			vals[r.Scheme] = map[string]*acc{}
		}
		a := vals[r.Scheme][g]
		if a == nil {
			a = &acc{}
			vals[r.Scheme][g] = a
		}
		a.sum += r.Coll.Slowdown
		a.n++
	}
	p := plot.New()
	p.Title.Text = "collective completion time / ideal"
	p.Y.Label.Text = "slowdown"
	p.Legend.Top = true
	w := vg.Points(8)
	for i, sc := range schemes {
		v := make(plotter.Values, len(groups))
		for j, g := range groups {
			if a := vals[sc][g]; a != nil {
				v[j] = a.sum / a.n
			}
		}
		b, err := plotter.NewBarChart(v, w)
		if err != nil {
			return "", fmt.Errorf("plot %s: %w", sc, err)
		}
		b.Color = palette[sc]
		b.LineStyle.Width = 0
		b.Offset = w * vg.Length(float64(i)-float64(len(schemes)-1)/2)
		p.Add(b)
		p.Legend.Add(sc, b)
	}
	p.NominalX(groups...)
	name := filepath.Join(dir, "collective.png")
	if err := p.Save(7*vg.Inch, 4*vg.Inch, name); err != nil {
		return "", fmt.Errorf("plot: %w", err)
	}
	return name, nil
}
