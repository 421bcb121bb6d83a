package main

import (
	"context"
	"fmt"

	"github.com/rdmacell/rdmacell/collectives"
	"github.com/rdmacell/rdmacell/collectives/exact"
)

// exactGrads makes the gradients independent of the number of ranks
// (--exact). A gradient is a sum over the samples of the global batch;
// rounded as it is added up, it depends on how the batch was split
// between ranks and in which order the shares were combined. Here every
// rank adds each sample's contribution to an exact accumulator per
// parameter, the accumulators are merged exactly across the ranks
// (collectives.AllReduceAcc), and each gradient is rounded once: the
// correctly rounded sum over the global batch, on 1 rank or 8.
//
// A sample's contribution must not depend on the split either: the loss
// gradient is scaled by the global batch size before the backward pass
// (see lossAndGrad), not by the rank's share of it.
type exactGrads struct {
	accs []exact.Acc // the layout of mlp.grads
	w, b [][]exact.Acc
}

func newExactGrads(m *mlp) *exactGrads {
	e := &exactGrads{accs: make([]exact.Acc, len(m.grads))}
	at := 0
	for _, l := range m.layers {
		e.w = append(e.w, e.accs[at:at+len(l.gw)])
		at += len(l.gw)
		e.b = append(e.b, e.accs[at:at+len(l.gb)])
		at += len(l.gb)
	}
	return e
}

// backward is layer.backward with each sample's weight and bias gradient
// added to the accumulators instead of to the rounded gradients. The
// gradient with respect to the input is per sample and needs no care.
func (e *exactGrads) backward(m *mlp, li int, dy []float32, rows int) []float32 {
	l := m.layers[li]
	aw, ab := e.w[li], e.b[li]
	dx := make([]float32, rows*l.in)
	for r := range rows {
		xr, dxr := l.x[r*l.in:(r+1)*l.in], dx[r*l.in:(r+1)*l.in]
		for o := range l.out {
			d := dy[r*l.out+o]
			if l.relu && l.z[r*l.out+o] <= 0 {
				continue
			}
			ab[o].AddFloat32(d)
			w, acc := l.w[o*l.in:(o+1)*l.in], aw[o*l.in:(o+1)*l.in]
			for i := range l.in {
				acc[i].AddFloat32(d * xr[i])
				dxr[i] += d * w[i]
			}
		}
	}
	return dx
}

// sync merges the accumulators over the ranks, rounds them into m.grads
// and empties them for the next step.
func (e *exactGrads) sync(ctx context.Context, g *collectives.Group, m *mlp) error {
	if err := collectives.AllReduceAcc(ctx, g, e.accs); err != nil {
		return fmt.Errorf("sum gradients exactly: %w", err)
	}
	for i := range e.accs {
		m.grads[i] = e.accs[i].Float32()
	}
	clear(e.accs)
	return nil
}
