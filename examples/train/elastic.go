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

// team is the ranks that train together: their group and the gradient
// buckets over it. With -elastic it shrinks when a rank dies (run the job
// with cellrun --elastic, which lets the others go on).
type team struct {
	world *collectives.Group // Open's: closing it leaves the job
	g     *collectives.Group // world, or what it shrank to
	sync  *gradSync
}

func (t *team) rank() int { return t.g.Rank() }
func (t *team) size() int { return t.g.Size() }

// close closes the shrunk group, if there is one, then the world's.
func (t *team) close() error {
	var err error
	if t.g != t.world {
		err = t.g.Close()
	}
	return errors.Join(err, t.world.Close())
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
		sub, serr := t.g.Shrink(ctx)
		if serr != nil {
			return 0, errors.Join(err, serr)
		}
		if sub.Size() == t.g.Size() {
			_ = sub.Close()
			return 0, err // nobody died: a failure of another kind
		}
		lost := lostRanks(t.g.Comm(), sub.Comm())
		old := t.g
		if old != t.world {
			_ = old.Close() // it failed with err already
		}
		t.g = sub
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
