package sim

import "math"

// DCQCN reaction point, the Mellanox variant as the ConWeave simulations
// configure it: start at line rate; α updated every 1 µs with g = 1/256;
// at most one decrease per 4 µs, R ← R·(1−α/2), floor 100 Mb/s; a 300 µs
// increase timer with one fast-recovery stage, then additive (40 Mb/s)
// and hyper (100 Mb/s) increase; no byte counter. Every cut sets the
// target rate to the rate it cuts, unless keep is set: then, as with the
// ConWeave setting's CLAMP_TARGET_RATE 0, a cut with no increase stage
// since the last one (a burst of CNPs) leaves the target where it was, so
// that a QP cut deep in one congestion episode climbs back halfway to its
// old rate at each fast-recovery stage rather than from its floor by
// additive steps. The timers are lazy:
// they are applied when the QP sends or hears a CNP, on their own grid,
// rather than costing an event per microsecond per QP; applied late,
// they give the rates they would have given on time.
type dcqcn struct {
	line, rc, rt, alpha float64 // Gb/s
	alphaT, decT, incT  int64
	stage               int
	cut                 bool // rate below line: the increase timer runs
	keep                bool // Config.DCQCNKeepTarget
}

const (
	dcG        = 1.0 / 256
	dcAlphaT   = 1000
	dcDecT     = 4000
	dcIncT     = 300_000
	dcMinRate  = 0.1
	dcAI       = 0.04
	dcHAI      = 0.1
	dcFastRecv = 1
)

func (d *dcqcn) init(gbps float64, keep bool) {
	*d = dcqcn{line: gbps, rc: gbps, rt: gbps, alpha: 1, decT: -dcDecT, keep: keep}
}

// decay applies the α ticks without CNP since the last update.
func (d *dcqcn) decay(now int64) {
	if k := (now - d.alphaT) / dcAlphaT; k > 0 {
		d.alpha *= math.Pow(1-dcG, float64(k))
		d.alphaT += k * dcAlphaT
	}
}

// cnp reacts to a congestion notification, after the increase stages
// due by now: the rate it cuts is the one the timer has raised, as if
// the timer were an event, so that when the lazy stages are applied does
// not change the rate.
func (d *dcqcn) cnp(now int64) {
	d.increase(now)
	d.decay(now)
	d.alpha = (1-dcG)*d.alpha + dcG
	d.alphaT = now
	if now-d.decT < dcDecT {
		return
	}
	d.decT = now
	if !d.keep || d.stage > 0 {
		d.rt = d.rc
	}
	d.rc = max(dcMinRate, d.rc*(1-d.alpha/2))
	d.stage = 0
	d.incT = now + dcIncT
	d.cut = true
}

// increase applies the increase-timer stages due by now.
func (d *dcqcn) increase(now int64) {
	for d.cut && now >= d.incT {
		switch {
		case d.stage < dcFastRecv:
		case d.stage == dcFastRecv:
			d.rt = min(d.line, d.rt+dcAI)
		default:
			d.rt = min(d.line, d.rt+dcHAI)
		}
		d.rc = (d.rt + d.rc) / 2
		d.stage++
		d.incT += dcIncT
		if d.line-d.rc < 1e-3 {
			d.rc, d.rt, d.cut = d.line, d.line, false
		}
	}
}
