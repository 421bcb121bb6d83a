package sim

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
)

// Workload is a flow-size distribution: a CDF of (size in bytes,
// cumulative percent) points, linearly interpolated between them.
type Workload struct {
	Name string
	size []float64
	cum  []float64 // 0..1
	mean float64
}

// LoadWorkload reads a CDF file ("bytes percent" per line).
func LoadWorkload(path string) (*Workload, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	defer fh.Close()
	name := path[strings.LastIndexByte(path, '/')+1:]
	name = strings.TrimSuffix(name, ".txt")
	w, err := ParseWorkload(name, fh)
	if err != nil {
		return nil, fmt.Errorf("workload %s: %w", path, err)
	}
	return w, nil
}

// ParseWorkload reads a CDF from r.
func ParseWorkload(name string, r io.Reader) (*Workload, error) {
	w := &Workload{Name: name}
	sc := bufio.NewScanner(r)
	for ln := 1; sc.Scan(); ln++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 {
			return nil, fmt.Errorf("line %d: %q, want \"bytes percent\"", ln, sc.Text())
		}
		sz, err1 := strconv.ParseFloat(f[0], 64)
		pc, err2 := strconv.ParseFloat(f[1], 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("line %d: %q: not numbers", ln, sc.Text())
		}
		if n := len(w.cum); n > 0 && (pc < w.cum[n-1]*100 || sz < w.size[n-1]) {
			return nil, fmt.Errorf("line %d: CDF not monotone", ln)
		}
		w.size = append(w.size, sz)
		w.cum = append(w.cum, pc/100)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(w.cum) < 2 || math.Abs(w.cum[len(w.cum)-1]-1) > 1e-9 {
		return nil, fmt.Errorf("CDF must have at least two points and end at 100")
	}
	for i := 1; i < len(w.cum); i++ {
		w.mean += (w.cum[i] - w.cum[i-1]) * (w.size[i] + w.size[i-1]) / 2
	}
	return w, nil
}

// Mean is the average flow size in bytes.
func (w *Workload) Mean() float64 { return w.mean }

// Sample draws a size for the uniform variate u in [0, 1).
func (w *Workload) Sample(u float64) int64 {
	i := sort.SearchFloat64s(w.cum, u)
	if i == 0 {
		return max(1, int64(w.size[0]))
	}
	if i >= len(w.cum) {
		i = len(w.cum) - 1
	}
	c0, c1 := w.cum[i-1], w.cum[i]
	x := w.size[i]
	if c1 > c0 {
		x = w.size[i-1] + (u-c0)/(c1-c0)*(w.size[i]-w.size[i-1])
	}
	return max(1, int64(math.Round(x)))
}

// Generate draws flows for hosts over [0, duration): per host a Poisson
// process of rate load·line/(8·mean) (payload bytes), destinations
// uniform over the other hosts, sorted by start.
func (w *Workload) Generate(hosts int, load, gbps float64, duration int64, seed uint64) []Flow {
	r := newRNG(seed ^ 0xf10f)
	gap := w.mean * 8 / (load * gbps) // mean ns between arrivals at a host
	var out []Flow
	for h := range hosts {
		for t := r.exp(gap); t < float64(duration); t += r.exp(gap) {
			d := r.intn(hosts - 1)
			if d >= h {
				d++
			}
			out = append(out, Flow{Src: int32(h), Dst: int32(d), Size: w.Sample(r.float()), Start: int64(t)})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	return out
}
