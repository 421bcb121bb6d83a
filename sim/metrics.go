package sim

import (
	"math"
	"sort"
)

// Ideal is the FCT of a flow alone on an empty fabric over h links, as
// the ConWeave analysis computes it: the pair's base RTT (propagation
// both ways plus one MTU's serialization per hop) plus the flow's bytes,
// headers included, at line rate.
func (c *Config) Ideal(size int64, h int) float64 {
	perBit := 1 / c.Gbps // ns per bit
	rtt := float64(2*int64(h)*c.LinkDelay) + float64(h)*float64(c.MTU)*8*perBit
	pkts := (size + int64(c.MTU) - 1) / int64(c.MTU)
	return rtt + float64(size+pkts*int64(c.Header))*8*perBit
}

// Summary is the slowdown distribution of a set of flows.
type Summary struct {
	Flows         int
	Avg, P50, P95 float64
	P99, P999     float64
}

func summarize(x []float64) Summary {
	if len(x) == 0 {
		return Summary{}
	}
	sort.Float64s(x)
	sum := 0.0
	for _, v := range x {
		sum += v
	}
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(x)))) - 1
		return x[min(max(i, 0), len(x)-1)]
	}
	return Summary{Flows: len(x), Avg: sum / float64(len(x)), P50: q(.5), P95: q(.95), P99: q(.99), P999: q(.999)}
}

// Result is what a run measured over its counted flows (started after
// the warm-up, before the end of arrivals): slowdown overall and for
// flows below and above one BDP.
type Result struct {
	All, Small, Large Summary
	// Unfinished counts counted flows that never completed.
	Unfinished int
	// Goodput is the counted flows' payload over their span, Gb/s per
	// host.
	Goodput float64
	Stats   Stats
}

// Result computes the run's metrics.
func (s *Sim) Result() Result {
	var all, small, large []float64
	var r Result
	var bytes int64
	for i := range s.flows {
		fl := &s.flows[i]
		if fl.Start < s.cfg.Warmup || fl.Start >= s.cfg.Duration {
			continue
		}
		if fl.Finish == 0 {
			r.Unfinished++
			continue
		}
		sd := max(1, float64(fl.Finish-fl.Start)/s.cfg.Ideal(fl.Size, s.f.hops(fl.Src, fl.Dst)))
		all = append(all, sd)
		if fl.Size < s.cfg.BDP {
			small = append(small, sd)
		} else {
			large = append(large, sd)
		}
		bytes += fl.Size
	}
	r.All, r.Small, r.Large = summarize(all), summarize(small), summarize(large)
	if span := s.cfg.Duration - s.cfg.Warmup; span > 0 {
		r.Goodput = float64(bytes) * 8 / float64(span) / float64(s.f.hosts)
	}
	r.Stats = s.st
	return r
}
