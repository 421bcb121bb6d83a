package collectives

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/rdmacell/rdmacell/comm"
)

// Hierarchical AllReduce, for a group that spans hosts with several ranks
// on each: the ranks of a host combine through the memory they share, the
// ranks with the same index on every host combine their slice of the
// vector across hosts over messages, and each host then gathers the
// slices through memory again. Across hosts every rank moves 1/L of the
// vector (L ranks per host), so every rank's network paths carry data,
// instead of the whole vector moving over cells between every pair of
// neighbours as in a flat ring.
//
// The host phase is an AllReduce rather than a reduce-scatter: through
// shared memory the difference is one more pass over the vector in memory,
// far cheaper than the bytes it saves on the network, and it leaves the
// slices free to be uneven. Each phase runs on a group of its own over a
// view of this group's channel that renumbers the ranks; the phases' pairs
// of ranks never overlap (the same host, or the same index on different
// hosts), and every rank runs them in the same order, so their messages
// take their places on the ordered channel like any other operation's.

// hostNamed is what a P2P offers when it knows its ranks' hosts; comm's
// ordered channel does.
type hostNamed interface {
	Host(peer int) string
}

// hierarchy is how a group splits for Hierarchical.
type hierarchy struct {
	local []int // the ranks of this host, ascending; this rank is local[index]
	cross []int // the index-th rank of every host, hosts in order of their first rank
	index int

	// The phase groups, made by the first hierarchical operation.
	host, across *Group
}

// planHierarchy returns the split of g's ranks by host, or nil when
// Hierarchical does not apply: the P2P does not name hosts, the group is
// on one host, a host has one rank, the hosts have different numbers of
// ranks, or this rank's host mates are not reached over shared memory.
// Every rank computes the same split from the same registrations.
func planHierarchy(g *Group) *hierarchy {
	hn, ok1 := g.p.(hostNamed)
	hl, ok2 := g.p.(hostLocal)
	if !ok1 || !ok2 || g.size < 4 {
		return nil
	}
	var names []string
	byHost := make(map[string][]int)
	for r := range g.size {
		h := hn.Host(r)
		if _, seen := byHost[h]; !seen {
			names = append(names, h)
		}
		byHost[h] = append(byHost[h], r)
	}
	per := len(byHost[names[0]])
	if len(names) < 2 || per < 2 {
		return nil
	}
	for _, h := range names {
		if len(byHost[h]) != per {
			return nil
		}
	}
	h := &hierarchy{local: byHost[hn.Host(g.rank)]}
	for i, r := range h.local {
		if r == g.rank {
			h.index = i
		} else if hl.Transport(r) != "shm" {
			return nil
		}
	}
	for _, name := range names {
		h.cross = append(h.cross, byHost[name][h.index])
	}
	return h
}

// hierarchical reports whether op runs hierarchically on g.
func (g *Group) hierarchical(op *operation) bool {
	return g.hier != nil && op.kind == kAllReduce && (g.algo == Auto || g.algo == Hierarchical)
}

// phases makes the phase groups on first use.
func (h *hierarchy) phases(g *Group) error {
	if h.host != nil {
		return nil
	}
	// The group's own fingerprint exchange has checked the ranks agree.
	opts := Options{ChunkBytes: g.chunk, SkipVerify: true}
	host, err := New(&rankView{p: g.p, ranks: h.local, rank: h.index}, opts)
	if err != nil {
		return err
	}
	across, err := New(&rankView{p: g.p, ranks: h.cross, rank: h.indexIn(g.rank)}, opts)
	if err != nil {
		return errors.Join(err, host.Close())
	}
	h.host, h.across = host, across
	return nil
}

func (h *hierarchy) indexIn(rank int) int {
	for i, r := range h.cross {
		if r == rank {
			return i
		}
	}
	return -1
}

func (h *hierarchy) close() error {
	if h == nil || h.host == nil {
		return nil
	}
	return errors.Join(h.host.Close(), h.across.Close())
}

// hierAllReduce runs an AllReduce in the three phases.
func (x *run) hierAllReduce() error {
	op, h := x.op, x.g.hier
	if err := h.phases(x.g); err != nil {
		return x.fail(-1, -1, "", err)
	}
	rop := op.rop
	if rop == Avg {
		rop = Sum // divided once, at the end
	}
	if err := h.host.phase(x.ctx, kAllReduce, op.dt, rop, op.send, op.recv, op.count, nil); err != nil {
		return x.phaseErr(h.local, "host phase", err)
	}
	counts := x.g.sc.intsN(0, len(h.local))
	per, extra := op.count/len(h.local), op.count%len(h.local)
	lo := 0
	for i := range counts {
		counts[i] = per
		if i < extra {
			counts[i]++
		}
		if i < h.index {
			lo += counts[i]
		}
	}
	mine := op.recv[lo*x.esize : (lo+counts[h.index])*x.esize]
	if len(mine) > 0 {
		// The same slice on every host, so the ranks of this phase skip
		// it together when it is empty.
		if err := h.across.phase(x.ctx, kAllReduce, op.dt, rop, mine, mine, counts[h.index], nil); err != nil {
			return x.phaseErr(h.cross, "phase across hosts", err)
		}
		x.finish(mine)
	}
	if err := h.host.phase(x.ctx, kAllGatherV, op.dt, 0, mine, op.recv, op.count, counts); err != nil {
		return x.phaseErr(h.local, "host phase", err)
	}
	return nil
}

// phase runs one operation of a hierarchical collective on a phase group,
// on the calling goroutine: only the parent's executor uses the group.
func (g *Group) phase(ctx context.Context, k kind, dt dtype, rop Op, send, recv []byte, count int, counts []int) error {
	op := g.newOp(ctx, k)
	op.dt, op.send, op.recv, op.count, op.counts = dt, send, recv, count, counts
	op.algo = choose(k, g.algo, g.size, len(recv))
	if rop != 0 {
		op.setOp(rop)
	}
	switch k {
	case kAllReduce:
		op.inPlace = len(send) > 0 && &send[0] == &recv[0]
	case kAllGatherV:
		op.inPlace = true // send is this rank's block of recv
	}
	return g.call(ctx, op)
}

// phaseErr names the failure of a phase in this group's ranks: the phase
// group numbers them by their place in ranks.
func (x *run) phaseErr(ranks []int, phase string, err error) error {
	var oe *OpError
	peer := -1
	if errors.As(err, &oe) && oe.Peer >= 0 && oe.Peer < len(ranks) {
		peer = ranks[oe.Peer]
	}
	return x.fail(-1, peer, "", fmt.Errorf("hierarchical %s: %w", phase, err))
}

// rankView is a subset of a P2P's ranks, renumbered from 0 in the order of
// ranks, for the phase groups of a hierarchical collective.
type rankView struct {
	p     comm.P2P
	ranks []int
	rank  int
}

func (v *rankView) Rank() int { return v.rank }

func (v *rankView) Size() int { return len(v.ranks) }

func (v *rankView) Isend(peer int, tag uint64, buf []byte) (comm.Request, error) {
	if peer < 0 || peer >= len(v.ranks) {
		return nil, fmt.Errorf("%w: peer %d of %d", ErrInvalidArgument, peer, len(v.ranks))
	}
	return v.p.Isend(v.ranks[peer], tag, buf)
}

func (v *rankView) Irecv(peer int, tag uint64, buf []byte) (comm.Request, error) {
	if peer < 0 || peer >= len(v.ranks) {
		return nil, fmt.Errorf("%w: peer %d of %d", ErrInvalidArgument, peer, len(v.ranks))
	}
	return v.p.Irecv(v.ranks[peer], tag, buf)
}

func (v *rankView) Alloc(n int) ([]byte, error) { return v.p.Alloc(n) }

func (v *rankView) Free(b []byte) error { return v.p.Free(b) }

// Transport and Err pass on what the P2P says, so that the host phase
// shares memory.
func (v *rankView) Transport(peer int) string {
	if hl, ok := v.p.(hostLocal); ok {
		return hl.Transport(v.ranks[peer])
	}
	return ""
}

func (v *rankView) Err() error {
	if hl, ok := v.p.(hostLocal); ok {
		return hl.Err()
	}
	return nil
}

func (v *rankView) Logger() *slog.Logger {
	if l, ok := v.p.(logging); ok {
		return l.Logger()
	}
	return slog.Default()
}
