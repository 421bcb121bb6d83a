package comm

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
)

// Shrink returns a communicator of the ranks of c that are alive: every
// survivor calls it after a rank of c was declared dead (a *PeerError),
// and each gets a communicator of the same ranks, renumbered densely in
// their order in c, or an error if they could not agree before ctx ended.
// c itself stays failed: its collectives keep failing with the dead
// rank's error. Ranks must call Shrink on c in the same order relative to
// each other, as Split.
//
// The survivors agree through the bootstrap: each says it has arrived, and
// waits until every rank of c has arrived or is known to have left (a
// lease expires about one TTL after a death); the first to have waited
// proposes those that arrived, and every rank takes that proposal (see
// bootstrap.Job.Decide). A rank that dies after the decision is a member
// of the new communicator, which then fails as c did and can be shrunk in
// turn.
func (c *Comm) Shrink(ctx context.Context) (*Comm, error) {
	c.mu.Lock()
	c.shrinks++
	seq := c.shrinks
	c.mu.Unlock()
	fail := func(err error) (*Comm, error) {
		return nil, fmt.Errorf("comm: rank %d: Shrink #%d: %w", c.rank, seq, err)
	}
	w := c.w
	name := "shrink/" + strconv.FormatUint(c.id, 16) + "/" + strconv.FormatUint(seq, 10)
	if err := w.job.Note(ctx, name, []byte("arrived")); err != nil {
		return fail(err)
	}
	arrived, err := w.job.GatherNotes(ctx, name, c.ranks)
	if err != nil {
		return fail(err)
	}
	var live []int
	for _, r := range c.ranks { // in c's order
		if _, ok := arrived[r]; ok {
			live = append(live, r)
		}
	}
	decided, err := w.job.Decide(ctx, name, []byte(rankNames(live)))
	if err != nil {
		return fail(err)
	}
	ranks, err := decodeRanks(decided, w.size)
	if err != nil {
		return fail(err)
	}
	if !slices.Contains(ranks, w.rank) {
		return fail(fmt.Errorf("the survivors (%s) left this rank out: its lease had expired", rankNames(ranks)))
	}
	sub, err := w.newComm(shrinkID(c.id, seq), ranks)
	if err != nil {
		return fail(err)
	}
	// A member that left after the decision fails the new communicator
	// at once, as it would have had it left later.
	for _, r := range ranks {
		if err := w.job.Departed(r); err != nil {
			p := w.peers[r]
			sub.poisonOrdered(&PeerError{Rank: r, Host: p.host, PID: p.pid, Err: err})
			break
		}
	}
	w.log.Debug("comm: shrunk", "from", len(c.ranks), "to", len(ranks), "ranks", rankNames(ranks))
	return sub, nil
}

// shrinkID derives the context id of a shrunk communicator, as childID
// does for Split's, in a space of its own.
func shrinkID(parent, seq uint64) uint64 {
	h := fnv.New64a()
	var b [17]byte
	b[0] = 's'
	binary.LittleEndian.PutUint64(b[1:], parent)
	binary.LittleEndian.PutUint64(b[9:], seq)
	h.Write(b[:])
	id := h.Sum64()
	if id <= worldID {
		id += worldID + 1
	}
	return id
}

// rankNames is "0,2,3", how a decision lists ranks.
func rankNames(rs []int) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = strconv.Itoa(r)
	}
	return strings.Join(parts, ",")
}

// decodeRanks reads a decision: distinct job ranks.
func decodeRanks(b []byte, size int) ([]int, error) {
	var rs []int
	for _, f := range strings.Split(string(b), ",") {
		r, err := strconv.Atoi(f)
		if err != nil || r < 0 || r >= size || slices.Contains(rs, r) {
			return nil, fmt.Errorf("%w: the survivors' decision %q is not a list of ranks", ErrProtocol, b)
		}
		rs = append(rs, r)
	}
	return rs, nil
}
