package timeline

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rdmacell/rdmacell/flight"
	"github.com/stretchr/testify/require"
)

// element is an SVG element as the test reads it: its attributes and the
// text directly inside it.
type element struct {
	name  string
	attr  map[string]string
	text  string
	title string // of a bar: its tooltip
}

// parseSVG checks that b is well-formed XML with an svg root, and returns
// its elements in document order.
func parseSVG(t *testing.T, b []byte) []*element {
	dec := xml.NewDecoder(bytes.NewReader(b))
	var els, open []*element
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		switch tok := tok.(type) {
		case xml.StartElement:
			e := &element{name: tok.Name.Local, attr: map[string]string{}}
			if len(els) == 0 {
				require.Equal(t, "svg", e.name)
				require.Equal(t, "http://www.w3.org/2000/svg", tok.Name.Space)
			}
			for _, a := range tok.Attr {
				e.attr[a.Name.Local] = a.Value
			}
			els, open = append(els, e), append(open, e)
		case xml.EndElement:
			open = open[:len(open)-1]
		case xml.CharData:
			if len(open) > 0 {
				e := open[len(open)-1]
				e.text += string(tok)
				if e.name == "title" && len(open) > 1 {
					open[len(open)-2].title = e.text
				}
			}
		}
	}
	require.Empty(t, open)
	return els
}

func render(t *testing.T, dumps []*flight.Dump) []byte {
	var buf bytes.Buffer
	require.NoError(t, RenderSVG(&buf, dumps))
	return buf.Bytes()
}

func withClass(els []*element, class string) []*element {
	var out []*element
	for _, e := range els {
		if e.attr["class"] == class {
			out = append(out, e)
		}
	}
	return out
}

func texts(els []*element) string {
	var sb strings.Builder
	for _, e := range els {
		if e.name == "text" {
			sb.WriteString(e.text + "\n")
		}
	}
	return sb.String()
}

func TestRenderSVGDrawsABarPerOperation(t *testing.T) {
	dumps := threeRanks(t)
	els := parseSVG(t, render(t, dumps))

	var want []string
	for _, d := range dumps {
		for _, o := range d.Ops {
			want = append(want, "rank "+strconv.Itoa(d.Rank)+": "+label(&o))
		}
	}
	bars := withClass(els, "op")
	var got []string
	var failed int
	for _, b := range bars {
		require.Equal(t, "1", b.attr["data-ops"], "no operation this wide is merged")
		name, _, _ := strings.Cut(b.title, " ring,")
		got = append(got, name)
		if b.attr["stroke"] == failedColour {
			failed++
			require.Contains(t, b.title, "peer 0: path 1 reset failed")
		}
	}
	require.ElementsMatch(t, want, got)
	require.Equal(t, 1, failed)

	hatched := 0
	for _, e := range els {
		if e.attr["fill"] == "url(#hatch)" && e.attr["class"] != "legend" {
			hatched++
		}
	}
	require.Equal(t, 2+1, hatched, "the two running operations and the legend's sample")
	require.Len(t, withClass(els, "reset"), 2)

	// The legend names each operation once, in a colour of its own, and
	// each mark.
	legend := withClass(els, "legend")
	require.Len(t, legend, 4+3)
	fills := map[string]bool{}
	for _, e := range legend[:4] {
		fills[e.attr["fill"]] = true
	}
	require.Len(t, fills, 4)
	all := texts(els)
	for _, s := range []string{"AllReduce\n", "AllGather\n", "Broadcast\n", "Barrier\n", "failed\n", "running when dumped\n", "path reset\n",
		"Job job-7: 3 ranks, 11 operations over 101ms\n", "rank 0\n", "rank 1\n", "rank 2\n", "milliseconds since the first operation began\n",
		"\n0\n20\n40\n60\n80\n100\n"} {
		require.Contains(t, all, s)
	}
	// Bars of the same operation name share a colour.
	colour := map[string]string{}
	for _, b := range bars {
		name := strings.Fields(strings.SplitN(b.title, ": ", 2)[1])[0]
		if c, ok := colour[name]; ok {
			require.Equal(t, c, b.attr["fill"], name)
		}
		colour[name] = b.attr["fill"]
	}
}

func TestRenderSVGMergesBarsNarrowerThanAPixel(t *testing.T) {
	// 3000 operations of 20 µs, 30 µs apart, then one of a second: the
	// short ones draw a twentieth of a pixel wide, except one that failed.
	var specs []opSpec
	for i := range 3000 {
		s := opSpec{comm: 1, seq: uint64(i), name: "AllReduce", start: float64(i) * 0.03, end: float64(i)*0.03 + 0.02, state: flight.Done}
		if i == 1500 {
			s.state, s.err = flight.Failed, "boom"
		}
		specs = append(specs, s)
	}
	specs = append(specs, opSpec{comm: 1, seq: 3000, name: "Barrier", start: 90, end: 1000, state: flight.Done})
	els := parseSVG(t, render(t, []*flight.Dump{mkDump(t, "j", 0, 1000, "close", specs...), mkDump(t, "j", 1, 1000, "close")}))
	bars := withClass(els, "op")
	total := 0
	for _, b := range bars {
		n, err := strconv.Atoi(b.attr["data-ops"])
		require.NoError(t, err)
		total += n
	}
	require.Equal(t, len(specs), total)
	require.Len(t, bars, 4, "the merged bars before and after the failed one, it, and the long one")
	require.Equal(t, failedColour, bars[1].attr["stroke"])
	w, err := strconv.ParseFloat(bars[1].attr["width"], 64)
	require.NoError(t, err)
	require.GreaterOrEqual(t, w, float64(markedWidth))
	require.Contains(t, bars[0].title, "1500 × AllReduce, #0 to #1499")
}

func TestRenderSVGScalesToManyRanks(t *testing.T) {
	for _, n := range []int{2, 64} {
		dumps := make([]*flight.Dump, n)
		for r := range dumps {
			dumps[r] = mkDump(t, "big", r, 10, "close", opSpec{comm: 1, seq: 1, name: "AllReduce", start: 1, end: 9, state: flight.Done})
		}
		els := parseSVG(t, render(t, dumps))
		require.Len(t, withClass(els, "op"), n)
		h, err := strconv.ParseFloat(els[0].attr["height"], 64)
		require.NoError(t, err)
		// Rows between minRow and maxRow pixels high: the picture fits a
		// screen with two ranks and with 64.
		require.LessOrEqual(t, h, float64(plotTop+n*maxRow+axisHeight+2*legendLine+8))
		require.GreaterOrEqual(t, h, float64(plotTop+n*minRow))
		require.Contains(t, texts(els), "rank "+strconv.Itoa(n-1)+"\n")
	}
}

func TestRenderSVGEscapesNames(t *testing.T) {
	d := mkDump(t, `<job & "co">`, 0, 10, "close", opSpec{comm: 1, seq: 1, name: "Op<x>", start: 1, end: 9, state: flight.Failed, err: "a < b & c"})
	els := parseSVG(t, render(t, []*flight.Dump{d}))
	require.Contains(t, texts(els), `Job <job & "co">: 1 rank, 1 operation over 8ms`)
	require.Contains(t, withClass(els, "op")[0].title, "Op<x> #1 (failed)")
}

var update = flag.Bool("update", false, "rewrite testdata/example.svg")

// TestExamplePicture draws a realistic job, four ranks of which rank 2
// enters every operation late, and compares it with testdata/example.svg.
// After a change to the picture, look at it and rewrite it with
//
//	go test ./flight/timeline -run ExamplePicture -update
//	rsvg-convert flight/timeline/testdata/example.svg -o flight/timeline/testdata/example.png
func TestExamplePicture(t *testing.T) {
	dumps := lateRank(t)
	got := render(t, dumps)
	els := parseSVG(t, got)
	// Rank 2 is late: each of its reductions of gradients starts to the
	// right of the other ranks'.
	gradients := map[int]bool{}
	for _, o := range dumps[0].Ops {
		if o.Bytes == 16<<20 {
			gradients[int(o.Seq)] = true
		}
	}
	x := map[int]map[int]float64{} // sequence number: rank: its bar's left
	for _, b := range withClass(els, "op") {
		var r, n, seq int
		var name string
		_, err := fmt.Sscanf(b.title, "rank %d: %s #%d", &r, &name, &seq)
		if b.attr["data-ops"] != "1" { // merged with the short ones after it
			_, err = fmt.Sscanf(b.title, "rank %d: %d × %s #%d", &r, &n, &name, &seq)
		}
		require.NoError(t, err, b.title)
		if !gradients[seq] {
			continue
		}
		if x[seq] == nil {
			x[seq] = map[int]float64{}
		}
		x[seq][r], err = strconv.ParseFloat(b.attr["x"], 64)
		require.NoError(t, err)
	}
	require.Len(t, x, len(gradients))
	for seq, xs := range x {
		require.Len(t, xs, 4, seq)
		for r, v := range xs {
			if r != 2 {
				require.Less(t, v, xs[2], "AllReduce #%d: rank %d", seq, r)
			}
		}
	}
	require.Len(t, withClass(els, "reset"), 2)
	name := filepath.Join("testdata", "example.svg")
	if *update {
		require.NoError(t, os.WriteFile(name, got, 0o644))
	}
	want, err := os.ReadFile(name)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "the picture changed: look at it, then rewrite it with -update")
}
