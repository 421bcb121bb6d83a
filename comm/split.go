package comm

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
)

// Split divides the communicator: every rank calls it, and those with the
// same color form a new communicator, ranked by key and then by their rank
// here. A rank with a negative color joins none and gets a nil
// communicator (and a nil error). The new communicator shares this one's
// connections; its messages travel on channels of its own, so they never
// mix with this communicator's. Ranks must call Split in the same order
// relative to each other; a disagreement is a *MismatchError.
func (c *Comm) Split(ctx context.Context, color, key int) (*Comm, error) {
	c.mu.Lock()
	c.splits++
	seq := c.splits
	c.mu.Unlock()

	n := len(c.ranks)
	const rec = 16
	all := make([]byte, rec*n)
	mine := all[rec*c.rank : rec*(c.rank+1)]
	binary.LittleEndian.PutUint64(mine, uint64(int64(color)))
	binary.LittleEndian.PutUint64(mine[8:], uint64(int64(key)))
	var hs []*Handle
	fail := func(err error) (*Comm, error) {
		for _, h := range hs {
			h.p.mu.Lock()
			h.cancelLocked(err)
			h.p.mu.Unlock()
		}
		return nil, fmt.Errorf("comm: rank %d: Split(color %d, key %d): %w", c.rank, color, key, err)
	}
	for j := range n {
		if j == c.rank {
			continue
		}
		s, err := c.post(true, chanInternal, j, seq, mine, false)
		if err != nil {
			return fail(err)
		}
		hs = append(hs, s)
		r, err := c.post(false, chanInternal, j, seq, all[rec*j:rec*(j+1)], false)
		if err != nil {
			return fail(err)
		}
		hs = append(hs, r)
	}
	for _, h := range hs {
		if _, err := h.Wait(ctx); err != nil {
			return fail(err)
		}
	}
	if color < 0 {
		return nil, nil
	}
	type member struct{ key, rank int }
	var ms []member
	for j := range n {
		rc := int(int64(binary.LittleEndian.Uint64(all[rec*j:])))
		rk := int(int64(binary.LittleEndian.Uint64(all[rec*j+8:])))
		if rc == color {
			ms = append(ms, member{rk, j})
		}
	}
	slices.SortFunc(ms, func(a, b member) int {
		if a.key != b.key {
			return cmp.Compare(a.key, b.key)
		}
		return cmp.Compare(a.rank, b.rank)
	})
	ranks := make([]int, len(ms))
	for i, m := range ms {
		ranks[i] = c.ranks[m.rank]
	}
	sub, err := c.w.newComm(childID(c.id, seq, color), ranks)
	if err != nil {
		return fail(err)
	}
	if errors.Is(c.w.failure(), ErrClosed) {
		_ = sub.Close()
		return fail(c.w.failure())
	}
	return sub, nil
}

// childID derives the context id of a communicator from its parent's, the
// number of the parent's Split call and the color: every member computes
// the same id without a word more.
func childID(parent, seq uint64, color int) uint64 {
	h := fnv.New64a()
	var b [24]byte
	binary.LittleEndian.PutUint64(b[0:], parent)
	binary.LittleEndian.PutUint64(b[8:], seq)
	binary.LittleEndian.PutUint64(b[16:], uint64(int64(color)))
	h.Write(b[:])
	id := h.Sum64()
	if id <= worldID {
		id += worldID + 1
	}
	return id
}
