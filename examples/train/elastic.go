package main

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/rdmacell/rdmacell/collectives"
	"github.com/rdmacell/rdmacell/comm"
	"github.com/rdmacell/rdmacell/flight"
)

// team is the ranks that train together: the communicator, its group and
// the gradient buckets over it. With -elastic it shrinks when a rank dies
// (run the job with cellrun --elastic, which lets the others go on).
type team struct {
	world *comm.Comm // closed by run
	c     *comm.Comm // world, or what it shrank to
	g     *collectives.Group
	gopts collectives.Options
	sync  *gradSync
}

func (t *team) rank() int { return t.g.Rank() }
func (t *team) size() int { return t.g.Size() }

// close closes the group, and the communicator if it is a shrunk one.
func (t *team) close() error {
	err := t.g.Close()
	if t.c != t.world {
		err = errors.Join(err, t.c.Close())
	}
	return err
}

// recover answers the failure err of an operation at sample pos of the
// epoch: without -elastic, or when no rank was lost, it is the error.
// Otherwise the survivors shrink to a new team, agree to go on from the
// furthest sample any of them reached with that rank's weights (a rank
// whose last AllReduce completed applied a step that the others, whose
// copy of it failed, did not), and it returns that sample.
func (t *team) recover(ctx context.Context, cfg config, model *mlp, pos int, err error) (int, error) {
	for {
		if !cfg.elastic || ctx.Err() != nil {
			return 0, err
		}
		sub, serr := t.c.Shrink(ctx)
		if serr != nil {
			return 0, errors.Join(err, serr)
		}
		if sub.Size() == t.c.Size() {
			_ = sub.Close()
			return 0, err // nobody died: a failure of another kind
		}
		lost := lostRanks(t.c, sub)
		old := t.c
		_ = t.close() // the old group failed with err already
		t.c = sub
		if t.g, err = collectives.New(sub.P2P(), t.gopts); err != nil {
			return 0, err
		}
		t.sync = newGradSync(t.g, model, cfg.bucket)
		var at int
		if at, err = t.agree(ctx, model, pos); err != nil {
			continue // another rank died meanwhile
		}
		if t.rank() == 0 {
			fmt.Printf("rank %s died: going on with %d of %d ranks from sample %d of the epoch\n",
				flight.FormatRanks(lost), sub.Size(), old.Size(), at)
		}
		return at, nil
	}
}

// agree settles where the team goes on: the furthest position of its
// ranks, and the weights of the lowest rank that reached it.
func (t *team) agree(ctx context.Context, model *mlp, pos int) (int, error) {
	furthest := []int64{int64(pos)}
	if err := collectives.AllReduce(ctx, t.g, furthest, furthest, collectives.Max); err != nil {
		return 0, err
	}
	root := []int64{int64(t.size())}
	if int64(pos) == furthest[0] {
		root[0] = int64(t.rank())
	}
	if err := collectives.AllReduce(ctx, t.g, root, root, collectives.Min); err != nil {
		return 0, err
	}
	if err := collectives.Broadcast(ctx, t.g, model.params, model.params, int(root[0])); err != nil {
		return 0, err
	}
	return int(furthest[0]), nil
}

// lostRanks are the job ranks of c that sub does not have.
func lostRanks(c, sub *comm.Comm) []int {
	var kept, lost []int
	for r := range sub.Size() {
		kept = append(kept, sub.WorldRank(r))
	}
	for r := range c.Size() {
		if w := c.WorldRank(r); !slices.Contains(kept, w) {
			lost = append(lost, w)
		}
	}
	return lost
}
