package collectives

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/rdmacell/rdmacell/comm"
)

// Hierarchical collectives, for a group that spans hosts with several
// ranks on each. AllReduce: the ranks of a host combine through the memory
// they share, the ranks with the same index on every host combine their
// slice of the vector across hosts over messages, and each host then
// gathers the slices through memory again. Across hosts every rank moves
// 1/L of the vector (L ranks per host), so every rank's network paths
// carry data, instead of the whole vector moving over cells between every
// pair of neighbours as in a flat ring.
//
// The host phase is an AllReduce rather than a reduce-scatter: through
// shared memory the difference is one more pass over the vector in memory,
// far cheaper than the bytes it saves on the network, and it leaves the
// slices free to be uneven. Each phase runs on a group of its own over a
// view of this group's channel that renumbers the ranks; the phases' pairs
// of ranks never overlap (the same host, or the same index on different
// hosts), and every rank runs them in the same order, so their messages
// take their places on the ordered channel like any other operation's.
//
// AllGather and ReduceScatter move each block across hosts once, between
// the ranks with its owner's index: AllGather gathers across hosts first,
// then through each host's memory; ReduceScatter the other way round, on
// the blocks reordered by index so that each rank's share of the host
// phase is what its column needs.
//
// AllToAll sends each host's blocks for another host in one message per
// pair of ranks with the same index, instead of one per pair of ranks,
// and sorts them out through the memory of the receiving host.
//
// Broadcast and Reduce cross hosts once, between the ranks that have the
// root's index on their hosts: Broadcast from the root to them, then from
// each of them through its host's memory; Reduce through each host's
// memory to them, then from them to the root.

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
	// at is every rank's index on its host, and host the place of its
	// host in the order of cross.
	at, host []int

	// The phase groups, made by the first hierarchical operation: the
	// ranks of this host, and the ranks of cross.
	onHost, across *Group
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
	h := &hierarchy{local: byHost[hn.Host(g.rank)], at: make([]int, g.size), host: make([]int, g.size)}
	for hi, name := range names {
		for i, r := range byHost[name] {
			h.at[r], h.host[r] = i, hi
		}
	}
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

// hierarchical reports whether op runs hierarchically on g. Reductions
// of the reproducible modes fold at one owner whatever the layout, and
// so do not.
func (g *Group) hierarchical(op *operation) bool {
	return g.hier != nil && op.kind.implements(Hierarchical) && (g.algo == Auto || g.algo == Hierarchical) &&
		op.mode == modeDefault
}

// phases makes the phase groups on first use.
func (h *hierarchy) phases(g *Group) error {
	if h.onHost != nil {
		return nil
	}
	// The group's own fingerprint exchange has checked the ranks agree.
	opts := Options{ChunkBytes: g.chunk, SkipVerify: true}
	host, err := New(&rankView{p: g.p, ranks: h.local, rank: h.index}, opts)
	if err != nil {
		return err
	}
	across, err := New(&rankView{p: g.p, ranks: h.cross, rank: h.host[g.rank]}, opts)
	if err != nil {
		return errors.Join(err, host.Close())
	}
	h.onHost, h.across = host, across
	return nil
}

func (h *hierarchy) close() error {
	if h == nil || h.onHost == nil {
		return nil
	}
	return errors.Join(h.onHost.Close(), h.across.Close())
}

// hierExec runs a hierarchical operation.
func (x *run) hierExec() error {
	if err := x.g.hier.phases(x.g); err != nil {
		return x.fail(-1, -1, "", err)
	}
	switch x.op.kind {
	case kAllReduce:
		return x.hierAllReduce()
	case kAllGather:
		return x.hierAllGather()
	case kReduceScatter:
		return x.hierReduceScatter()
	case kAllToAll:
		return x.hierAllToAll()
	case kBroadcast:
		return x.hierBroadcast()
	}
	return x.hierReduce()
}

// partial is the op of the phases of a reduction: Avg sums, and the last
// phase divides once.
func partial(op Op) Op {
	if op == Avg {
		return Sum
	}
	return op
}

// byIndex is where rank r's block of b bytes goes when the blocks are
// ordered by the index of their owners on their hosts, then by host.
func (h *hierarchy) byIndex(r, b int) int { return (h.at[r]*len(h.cross) + h.host[r]) * b }

// fromIndexOrder copies the b-byte blocks of src, ordered by index then
// host, into dst in rank order.
func (h *hierarchy) fromIndexOrder(dst, src []byte, b int) {
	for r := range h.host {
		at := h.byIndex(r, b)
		copy(dst[r*b:(r+1)*b], src[at:at+b])
	}
}

// byHost is where it goes when they are ordered by host, then by index.
func (h *hierarchy) byHost(r, b int) int { return (h.host[r]*len(h.local) + h.at[r]) * b }

// hierBufs returns the scratch buffers of AllGather and ReduceScatter: a
// column's blocks, and every block.
func (x *run) hierBufs(column, all int) ([]byte, []byte, error) {
	c, err := x.g.sc.buf(bufTmp, column)
	if err != nil {
		return nil, nil, err
	}
	a, err := x.g.sc.buf(bufWork, all)
	return c, a, err
}

// hierAllReduce runs an AllReduce in the three phases.
func (x *run) hierAllReduce() error {
	op, h := x.op, x.g.hier
	rop := partial(op.rop)
	if err := h.onHost.phase(x.ctx, kAllReduce, op.dt, rop, op.send, op.recv, op.count, nil, 0); err != nil {
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
		if err := h.across.phase(x.ctx, kAllReduce, op.dt, rop, mine, mine, counts[h.index], nil, 0); err != nil {
			return x.phaseErr(h.cross, "phase across hosts", err)
		}
		x.finish(mine)
	}
	if err := h.onHost.phase(x.ctx, kAllGatherV, op.dt, 0, mine, op.recv, op.count, counts, 0); err != nil {
		return x.phaseErr(h.local, "host phase", err)
	}
	return nil
}

// hierBroadcast crosses hosts among the ranks with the root's index, then
// broadcasts through each host's memory.
func (x *run) hierBroadcast() error {
	op, h := x.op, x.g.hier
	index := h.at[op.root]
	if h.index == index {
		var send []byte
		if x.g.rank == op.root {
			send = op.send
		}
		if err := h.across.phase(x.ctx, kBroadcast, op.dt, 0, send, op.recv, op.count, nil, h.host[op.root]); err != nil {
			return x.phaseErr(h.cross, "phase across hosts", err)
		}
	}
	var send []byte
	if h.index == index {
		send = op.recv
	}
	if err := h.onHost.phase(x.ctx, kBroadcast, op.dt, 0, send, op.recv, op.count, nil, index); err != nil {
		return x.phaseErr(h.local, "host phase", err)
	}
	return nil
}

// hierReduce reduces through each host's memory to the rank with the
// root's index, then across hosts among those ranks to the root.
func (x *run) hierReduce() error {
	op, h := x.op, x.g.hier
	rop := partial(op.rop)
	index := h.at[op.root]
	var part []byte // this host's reduction, at the rank with the root's index
	if h.index == index {
		part = op.recv
		if x.g.rank != op.root {
			var err error
			if part, err = x.g.sc.buf(bufWork, len(op.send)); err != nil {
				return x.fail(-1, -1, "", err)
			}
		}
	}
	if err := h.onHost.phase(x.ctx, kReduce, op.dt, rop, op.send, part, op.count, nil, index); err != nil {
		return x.phaseErr(h.local, "host phase", err)
	}
	if h.index != index {
		return nil
	}
	var recv []byte
	if x.g.rank == op.root {
		recv = op.recv
	}
	if err := h.across.phase(x.ctx, kReduce, op.dt, rop, part, recv, op.count, nil, h.host[op.root]); err != nil {
		return x.phaseErr(h.cross, "phase across hosts", err)
	}
	x.finish(recv)
	return nil
}

// hierAllGather gathers every rank's block across hosts among the ranks of
// its index, then those through each host's memory, and puts the blocks
// in rank order.
func (x *run) hierAllGather() error {
	op, h := x.op, x.g.hier
	b, hosts := op.count*x.esize, len(h.cross)
	column, all, err := x.hierBufs(hosts*b, x.g.size*b)
	if err != nil {
		return x.fail(-1, -1, "", err)
	}
	if err := h.across.phase(x.ctx, kAllGather, op.dt, 0, op.send, column, op.count, nil, 0); err != nil {
		return x.phaseErr(h.cross, "phase across hosts", err)
	}
	if err := h.onHost.phase(x.ctx, kAllGather, op.dt, 0, column, all, hosts*op.count, nil, 0); err != nil {
		return x.phaseErr(h.local, "host phase", err)
	}
	h.fromIndexOrder(op.recv, all, b)
	return nil
}

// hierReduceScatter reorders the blocks by the index of their owners,
// reduces them through each host's memory so that each rank holds its
// column's, and reduces those across hosts among the column.
func (x *run) hierReduceScatter() error {
	op, h := x.op, x.g.hier
	rop := partial(op.rop)
	b, hosts := op.count*x.esize, len(h.cross)
	column, byIndex, err := x.hierBufs(hosts*b, x.g.size*b)
	if err != nil {
		return x.fail(-1, -1, "", err)
	}
	for r := range x.g.size {
		at := h.byIndex(r, b)
		copy(byIndex[at:at+b], op.send[r*b:(r+1)*b])
	}
	if err := h.onHost.phase(x.ctx, kReduceScatter, op.dt, rop, byIndex, column, hosts*op.count, nil, 0); err != nil {
		return x.phaseErr(h.local, "host phase", err)
	}
	if err := h.across.phase(x.ctx, kReduceScatter, op.dt, rop, column, op.recv, op.count, nil, 0); err != nil {
		return x.phaseErr(h.cross, "phase across hosts", err)
	}
	x.finish(op.recv)
	return nil
}

// hierAllToAll sends, across hosts among the ranks of this index, the
// blocks for each host at once, then, through each host's memory, each
// block on to the rank it is for.
func (x *run) hierAllToAll() error {
	op, h := x.op, x.g.hier
	b, hosts, per := op.count*x.esize, len(h.cross), len(h.local)
	from, to, err := x.hierBufs(x.g.size*b, x.g.size*b)
	if err != nil {
		return x.fail(-1, -1, "", err)
	}
	for r := range x.g.size {
		at := h.byHost(r, b)
		copy(to[at:at+b], op.send[r*b:(r+1)*b])
	}
	// Now to[host][index] is the block for that rank; after this phase
	// from[host][index] is the block the rank of this index on that host
	// has for the rank of that index on this one.
	if err := h.across.phase(x.ctx, kAllToAll, op.dt, 0, to, from, per*op.count, nil, 0); err != nil {
		return x.phaseErr(h.cross, "phase across hosts", err)
	}
	for hi := range hosts {
		for i := range per {
			src, dst := (hi*per+i)*b, (i*hosts+hi)*b
			copy(to[dst:dst+b], from[src:src+b])
		}
	}
	if err := h.onHost.phase(x.ctx, kAllToAll, op.dt, 0, to, from, hosts*op.count, nil, 0); err != nil {
		return x.phaseErr(h.local, "host phase", err)
	}
	// from[index][host] is now the block of the rank of that index on
	// that host for this rank.
	h.fromIndexOrder(op.recv, from, b)
	return nil
}

// phase runs one operation of a hierarchical collective on a phase group,
// on the calling goroutine: only the parent's executor uses the group.
func (g *Group) phase(ctx context.Context, k kind, dt dtype, rop Op, send, recv []byte, count int, counts []int, root int) error {
	op := g.newOp(ctx, k)
	op.dt, op.send, op.recv, op.count, op.counts, op.root = dt, send, recv, count, counts, root
	bytes := len(recv) // what choose sizes by: the whole vector
	if k == kReduce || k == kReduceScatter {
		bytes = len(send)
	}
	op.algo = choose(k, g.algo, g.size, bytes)
	if rop != 0 {
		op.setOp(rop)
	}
	if k == kAllGatherV {
		op.inPlace = true // send is this rank's block of recv
	} else {
		op.inPlace = len(send) > 0 && len(recv) > 0 && &send[0] == &recv[0]
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
