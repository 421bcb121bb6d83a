package collectives

import (
	"context"
	"errors"

	"github.com/rdmacell/rdmacell/comm"
)

// Open joins the job and returns a Group over its world communicator.
// The group owns the communicator: its Close closes both, and it carries
// the point-to-point calls (Send, Recv, Probe and the rest) as well as
// the collectives. It is the one call a program under the launcher makes:
//
//	g, err := collectives.Open(ctx, collectives.Options{})
//	...
//	defer g.Close()
//
// With opts.Comm.WorldSize 0, Open reads the launcher's environment, both
// comm.OptionsFromEnv and OptionsFromEnv; what opts sets other than the
// rank, world size, job and etcd fields then overrides it (Reproducible
// set in either turns it on). With a world size given it reads no
// environment. An option that cannot be used is an *ArgError before
// anything joins.
func Open(ctx context.Context, opts Options) (*Group, error) {
	opts, err := withEnv(opts)
	if err != nil {
		return nil, err
	}
	if err := opts.check(opts.Comm.Rank, "Open"); err != nil {
		return nil, err
	}
	c, err := comm.Init(ctx, opts.Comm)
	if err != nil {
		return nil, err
	}
	return owning(c, opts)
}

// withEnv is opts over what the launcher's environment asks for, when
// opts give no world size.
func withEnv(opts Options) (Options, error) {
	if opts.Comm.WorldSize != 0 {
		return opts, nil
	}
	env, err := OptionsFromEnv()
	if err != nil {
		return Options{}, err
	}
	if opts.Algorithm == Auto {
		opts.Algorithm = env.Algorithm
	}
	opts.Reproducible = opts.Reproducible || env.Reproducible
	return opts, nil
}

// owning returns a group over c that closes c.
func owning(c *comm.Comm, opts Options) (*Group, error) {
	g, err := New(c.P2P(), opts)
	if err != nil {
		return nil, errors.Join(err, c.Close())
	}
	g.owns = true
	return g, nil
}

// Options returns the options the group runs with: those it was made
// with, and what Open read from the environment.
func (g *Group) Options() Options { return g.opts }

// Comm returns the communicator the group runs over, for what is the
// communicator's own (LocalRank, Host, Stats, Abort, MetricsAddr); nil
// for a group New made over another P2P.
func (g *Group) Comm() *comm.Comm { return g.c }

// communicator returns g's communicator, or an error for op when g runs
// over another P2P.
func (g *Group) communicator(op string) (*comm.Comm, error) {
	if g.c == nil {
		return nil, &ArgError{Rank: g.rank, Op: op, Arg: "g", Problem: "runs over a P2P that is not a communicator: make the group with Open, or with New over Comm.P2P"}
	}
	return g.c, nil
}

// Split divides the group: every rank calls it, and those with the same
// color form a new group, ranked by key and then by their rank here, as
// comm.Comm.Split ranks them. A rank with a negative color joins none and
// gets a nil group and a nil error. The new group has this one's options
// and owns a communicator of its own, which shares this one's
// connections; close it before the group it came from, whose Close ends
// the job's membership when it is the world's.
func (g *Group) Split(ctx context.Context, color, key int) (*Group, error) {
	c, err := g.communicator("Split")
	if err != nil {
		return nil, err
	}
	sub, err := c.Split(ctx, color, key)
	if err != nil || sub == nil {
		return nil, err
	}
	return owning(sub, g.opts)
}

// Shrink is what the survivors of a lost rank call to go on without it:
// every live rank gets a group of the same live ranks, renumbered densely
// in their order here (see comm.Comm.Shrink, which agrees on them). This
// group stays failed; close the new one before it, as for Split. A rank
// that dies after the agreement fails the new group in turn, which can be
// shrunk again.
func (g *Group) Shrink(ctx context.Context) (*Group, error) {
	c, err := g.communicator("Shrink")
	if err != nil {
		return nil, err
	}
	sub, err := c.Shrink(ctx)
	if err != nil {
		return nil, err
	}
	return owning(sub, g.opts)
}
