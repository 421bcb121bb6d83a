package timeline

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rdmacell/rdmacell/flight"
)

// The picture's geometry, in pixels.
const (
	svgWidth    = 1200
	plotLeft    = 84 // room for the rank labels
	plotRight   = svgWidth - 24
	plotTop     = 62 // below the title and the subtitle
	plotHeight  = 560
	minRow      = 12
	maxRow      = 40
	axisHeight  = 44
	legendLine  = 20
	markedWidth = 3 // the least width of a failed, running or reset bar
)

// palette colours the operations; it leaves out red, which marks failures.
var palette = [...]string{
	"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948",
	"#9c755f", "#ff9da7", "#bab0ac", "#a0cbe8", "#ffbe7d", "#8cd17d",
}

// knownOps keep their colours from one picture to the next.
var knownOps = [...]string{
	"AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce", "AllToAll", "Barrier", "Send", "Recv",
}

const failedColour = "#d62728"

// bar is what the picture draws for one operation, or for a run of short
// ones of the same name merged into one (n of them, first to last).
type bar struct {
	x0, x1      float64
	first, last *flight.Op
	n           int
	marked      bool // failed, running or reset: never merged
}

// RenderSVG draws the dumps of one job as an SVG picture: one row per
// rank, its operations as bars coloured by name, failed ones outlined in
// red, running ones hatched, a triangle where a path was reset, under a
// time axis and above a legend. An operation narrower than a pixel that
// starts within a pixel of the bar before it on its row, has the same name
// and finished without failure or reset is drawn as part of that bar, so
// that a few thousand operations still draw as a few hundred bars at most.
func RenderSVG(w io.Writer, dumps []*flight.Dump) error {
	j, err := newJob(dumps)
	if err != nil {
		return err
	}
	span := j.span
	if span <= 0 {
		span = time.Microsecond
	}
	scale := float64(plotRight-plotLeft) / float64(span) // pixels per nanosecond
	x := func(d time.Duration) float64 { return plotLeft + float64(d)*scale }

	row := float64(min(max(plotHeight/len(j.ranks), minRow), maxRow))
	bottom := plotTop + row*float64(len(j.ranks))
	names := opNames(j)
	colour := make(map[string]string, len(names))
	for i, n := range names {
		colour[n] = palette[colourIndex(n, i)%len(palette)]
	}
	legend := legendItems(names)
	height := bottom + axisHeight + legendHeight(legend) + 8

	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%.0f" viewBox="0 0 %d %.0f" font-family="DejaVu Sans, Verdana, sans-serif">`+"\n",
		svgWidth, height, svgWidth, height)
	bw.WriteString(`<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">` +
		`<rect width="3" height="6" fill="#fff" fill-opacity="0.6"/></pattern></defs>` + "\n")
	fmt.Fprintf(bw, `<rect width="100%%" height="100%%" fill="#fff"/>`+"\n")
	fmt.Fprintf(bw, `<text x="%d" y="22" font-size="16" font-weight="bold">%s</text>`+"\n", plotLeft, esc(title(j)))
	fmt.Fprintf(bw, `<text x="%d" y="42" font-size="12" fill="#555">%s</text>`+"\n", plotLeft, esc(subtitle(j)))

	// Rows, their labels, the ticks' grid lines.
	for i := range j.ranks {
		y := plotTop + row*float64(i)
		if i%2 == 0 {
			fmt.Fprintf(bw, `<rect x="%d" y="%.1f" width="%d" height="%.1f" fill="#f3f3f3"/>`+"\n", plotLeft, y, plotRight-plotLeft, row)
		}
		fmt.Fprintf(bw, `<text x="%d" y="%.1f" font-size="%.0f" text-anchor="end" dominant-baseline="central">rank %d</text>`+"\n",
			plotLeft-8, y+row/2, min(12, row*0.8), j.ranks[i].d.Rank)
	}
	ticks, unit, unitName, decimals := axisTicks(span)
	for _, t := range ticks {
		fmt.Fprintf(bw, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#d8d8d8"/>`+"\n", x(t), plotTop, x(t), bottom)
	}

	// Bars.
	for i := range j.ranks {
		r := &j.ranks[i]
		y := plotTop + row*float64(i) + row*0.12
		lane := row * 0.76 / float64(r.lanes)
		for l := range r.lanes {
			for _, b := range bars(r, l, x) {
				drawBar(bw, r.d.Rank, b, y+lane*float64(l), lane, colour[b.first.Name])
			}
		}
	}

	// The time axis.
	fmt.Fprintf(bw, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#333"/>`+"\n", plotLeft, bottom, plotRight, bottom)
	for _, t := range ticks {
		fmt.Fprintf(bw, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", x(t), bottom, x(t), bottom+5)
		v := strconv.FormatFloat(float64(t)/float64(unit), 'f', decimals, 64)
		fmt.Fprintf(bw, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="middle">%s</text>`+"\n", x(t), bottom+18, v)
	}
	fmt.Fprintf(bw, `<text x="%d" y="%.1f" font-size="11" text-anchor="end" fill="#555">%s since the first operation began</text>`+"\n",
		plotRight, bottom+36, unitName)

	drawLegend(bw, legend, colour, bottom+axisHeight)
	bw.WriteString("</svg>\n")
	return bw.Flush()
}

// bars returns the bars of lane l of r, merging short ones as RenderSVG
// says.
func bars(r *rank, l int, x func(time.Duration) float64) []bar {
	var bs []bar
	for _, s := range r.ops {
		if s.lane != l {
			continue
		}
		o := s.op
		b := bar{x0: x(s.start), x1: x(s.end), first: o, last: o, n: 1, marked: o.State != flight.Done || resets(o)}
		if n := len(bs); n > 0 && !b.marked && b.x1-b.x0 < 1 {
			if p := &bs[n-1]; !p.marked && p.first.Name == o.Name && b.x0-p.x1 < 1 {
				p.x1, p.last = max(p.x1, b.x1), o
				p.n++
				continue
			}
		}
		bs = append(bs, b)
	}
	return bs
}

func drawBar(w *bufio.Writer, rank int, b bar, y, h float64, fill string) {
	width := max(b.x1-b.x0, 1)
	if b.marked {
		width = max(width, markedWidth)
	}
	stroke := ""
	if b.first.State == flight.Failed {
		stroke = ` stroke="` + failedColour + `" stroke-width="2"`
	}
	fmt.Fprintf(w, `<rect class="op" data-ops="%d" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"%s><title>%s</title></rect>`+"\n",
		b.n, b.x0, y, width, h, fill, stroke, esc(barTitle(rank, b)))
	if b.first.State == flight.Running {
		fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="url(#hatch)"/>`+"\n", b.x0, y, width, h)
		if width > 60 && h >= 9 {
			fmt.Fprintf(w, `<text x="%.1f" y="%.1f" font-size="%.0f" text-anchor="end" dominant-baseline="central" paint-order="stroke" stroke="#fff" stroke-width="3">running</text>`+"\n",
				b.x0+width-4, y+h/2, min(11, h*0.8))
		}
	}
	if resets(b.first) {
		e := b.x0 + width
		s := min(5, h/2)
		fmt.Fprintf(w, `<path class="reset" d="M%.1f %.1fL%.1f %.1fL%.1f %.1fZ" fill="#111" stroke="#fff" stroke-width="0.5"/>`+"\n",
			e-s, y-1, e+s, y-1, e, y-1+s*1.4)
	}
}

func barTitle(rank int, b bar) string {
	o := b.first
	if b.n > 1 {
		return fmt.Sprintf("rank %d: %d × %s, #%d to #%d", rank, b.n, o.Name, o.Seq, b.last.Seq)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "rank %d: %s", rank, label(o))
	if o.Algorithm != "" {
		fmt.Fprintf(&sb, " %s", o.Algorithm)
	}
	fmt.Fprintf(&sb, ", %d bytes", o.Bytes)
	if o.State != flight.Running {
		fmt.Fprintf(&sb, ", %v", o.End.Sub(o.Start))
	}
	if o.Err != "" {
		fmt.Fprintf(&sb, ": %s", o.Err)
	}
	if o.Peer >= 0 {
		fmt.Fprintf(&sb, "; last waited on peer %d (%s, step %d)", o.Peer, o.Dir, o.Step)
	}
	if resets(o) {
		fmt.Fprintf(&sb, "; %d path resets begun, %d done", o.Traffic.GiveUps, o.Traffic.Resets)
	}
	return sb.String()
}

func title(j *job) string {
	id := j.id
	if id == "" {
		id = "(unnamed)"
	}
	return fmt.Sprintf("Job %s: %s, %s over %s", id, plural(len(j.ranks), "rank"), plural(j.ops, "operation"), roundDuration(j.span))
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

func subtitle(j *job) string {
	var failed, running int
	for _, r := range j.ranks {
		for _, s := range r.ops {
			switch s.op.State {
			case flight.Failed:
				failed++
			case flight.Running:
				running++
			}
		}
	}
	return fmt.Sprintf("from %s; %d failed, %d running when dumped", j.t0.UTC().Format("2006-01-02 15:04:05.000 MST"), failed, running)
}

// roundDuration keeps three significant digits of d.
func roundDuration(d time.Duration) time.Duration {
	for r := time.Duration(1); r < d/100; r *= 10 {
		d = d.Round(r)
	}
	return d
}

// opNames returns the names of j's operations, the known ones first in
// their order, then the others sorted.
func opNames(j *job) []string {
	var ns []string
	for _, r := range j.ranks {
		for _, s := range r.ops {
			ns = append(ns, s.op.Name)
		}
	}
	slices.SortFunc(ns, func(a, b string) int {
		ka, kb := known(a), known(b)
		if ka != kb {
			return ka - kb
		}
		return strings.Compare(a, b)
	})
	return slices.Compact(ns)
}

// known is the index of name in knownOps, or len(knownOps).
func known(name string) int {
	if i := slices.Index(knownOps[:], name); i >= 0 {
		return i
	}
	return len(knownOps)
}

// colourIndex is the palette entry of the ith of a picture's operation
// names: its own for a known one.
func colourIndex(name string, i int) int {
	if k := known(name); k < len(knownOps) {
		return k
	}
	return len(knownOps) + i
}

// axisTicks returns ticks at a round step over span, about eight of them,
// with the unit their labels are in and the decimals those need.
func axisTicks(span time.Duration) (ticks []time.Duration, unit time.Duration, unitName string, decimals int) {
	raw := float64(span) / 8
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * mag
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	st := max(time.Duration(step), 1)
	switch {
	case span >= 2*time.Second:
		unit, unitName = time.Second, "seconds"
	case span >= 2*time.Millisecond:
		unit, unitName = time.Millisecond, "milliseconds"
	default:
		unit, unitName = time.Microsecond, "microseconds"
	}
	decimals = max(0, int(math.Ceil(-math.Log10(float64(st)/float64(unit)))))
	for t := time.Duration(0); t <= span; t += st {
		ticks = append(ticks, t)
	}
	return ticks, unit, unitName, decimals
}

// legendItem is one entry of the legend: an operation's colour, or a mark.
type legendItem struct {
	name string
	kind string // "op", "failed", "running", "reset"
	x, y float64
}

// legendItems lays the legend out in lines across the picture.
func legendItems(names []string) []legendItem {
	items := make([]legendItem, 0, len(names)+3)
	for _, n := range names {
		items = append(items, legendItem{name: n, kind: "op"})
	}
	items = append(items, legendItem{name: "failed", kind: "failed"}, legendItem{name: "running when dumped", kind: "running"},
		legendItem{name: "path reset", kind: "reset"})
	x, y := float64(plotLeft), 0.0
	for i := range items {
		w := 24 + 7*float64(len(items[i].name)) + 18 // swatch, text, gap
		if x+w > plotRight && x > plotLeft {
			x, y = plotLeft, y+legendLine
		}
		items[i].x, items[i].y = x, y
		x += w
	}
	return items
}

func legendHeight(items []legendItem) float64 { return items[len(items)-1].y + legendLine }

func drawLegend(w *bufio.Writer, items []legendItem, colour map[string]string, top float64) {
	for _, it := range items {
		x, y := it.x, top+it.y
		switch it.kind {
		case "op":
			fmt.Fprintf(w, `<rect class="legend" x="%.1f" y="%.1f" width="16" height="12" fill="%s"/>`+"\n", x, y, colour[it.name])
		case "failed":
			fmt.Fprintf(w, `<rect class="legend" x="%.1f" y="%.1f" width="16" height="12" fill="#bab0ac" stroke="%s" stroke-width="2"/>`+"\n",
				x+1, y+1, failedColour)
		case "running":
			fmt.Fprintf(w, `<rect class="legend" x="%.1f" y="%.1f" width="16" height="12" fill="#4e79a7"/>`+
				`<rect x="%.1f" y="%.1f" width="16" height="12" fill="url(#hatch)"/>`+"\n", x, y, x, y)
		case "reset":
			fmt.Fprintf(w, `<path class="legend" d="M%.1f %.1fL%.1f %.1fL%.1f %.1fZ" fill="#111"/>`+"\n", x+3, y, x+13, y, x+8, y+7)
		}
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f" font-size="12" dominant-baseline="central">%s</text>`+"\n", x+22, y+6, esc(it.name))
	}
}

// esc escapes s for XML text and attributes.
func esc(s string) string {
	var sb strings.Builder
	xml.EscapeText(&sb, []byte(s))
	return sb.String()
}
