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
}

// newExactGrads gives m's layers accumulators, which their backward pass
// then fills instead of their gradients.
func newExactGrads(m *mlp) *exactGrads {
	e := &exactGrads{accs: make([]exact.Acc, len(m.grads))}
	at := 0
	for _, l := range m.layers {
		l.aw = e.accs[at : at+len(l.gw)]
		at += len(l.gw)
		l.ab = e.accs[at : at+len(l.gb)]
		at += len(l.gb)
	}
	return e
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
