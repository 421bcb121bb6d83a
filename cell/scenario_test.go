package cell_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/cell"
	"github.com/rdmacell/rdmacell/cell/celltest"
	"github.com/rdmacell/rdmacell/verbs"
)

// requireClean asserts what every scenario must hold: no violation, and
// every range ended exactly once at each end, with intact bytes if
// delivered.
func requireClean(t *testing.T, f *fabric) {
	t.Helper()
	require.Empty(t, f.Violations)
	for _, x := range f.Xfers {
		require.Len(t, x.Sent, 1, "tag %d: send events", x.Tag)
		require.Len(t, x.Recv, 1, "tag %d: receive events", x.Tag)
		require.False(t, x.Corrupt, "tag %d", x.Tag)
	}
}

// requireDelivered asserts every range succeeded at both ends.
func requireDelivered(t *testing.T, f *fabric) {
	t.Helper()
	requireClean(t, f)
	for _, x := range f.Xfers {
		require.NoError(t, x.Sent[0].Err, "tag %d", x.Tag)
		require.NoError(t, x.Recv[0].Err, "tag %d", x.Tag)
		require.Equal(t, x.N, x.Recv[0].Len, "tag %d", x.Tag)
	}
}

// settle runs the fabric to completion, then on for a while so that late
// copies still in flight land (and would show as violations).
func settle(t *testing.T, f *fabric) {
	t.Helper()
	f.Run(5000 * ms)
	require.True(t, f.Done(), "ranges still open at t=%dns", f.Now)
	f.RunFor(f.Now + 20*ms)
}

func firstCellOn(q int) func(m *msg) bool {
	seen := false
	return func(m *msg) bool {
		if m.Kind == celltest.MsgCell && m.Path == q && !seen {
			seen = true
			return true
		}
		return false
	}
}

func TestNormalFlow(t *testing.T) {
	for _, tc := range []struct {
		name      string
		paths     int
		sizes     []int64
		recvFirst bool
		cells     int // distinct cells expected
	}{
		{"empty range", 2, []int64{0}, true, 0},
		{"one byte", 2, []int64{1}, true, 1},
		{"one MTU is a lone WRITE_WITH_IMM", 1, []int64{4096}, false, 1},
		{"MTU plus one is a chain", 2, []int64{4097}, true, 1},
		{"exactly one cell", 2, []int64{16 << 10}, false, 1},
		{"many cells, one path", 1, []int64{1 << 20}, true, 64},
		{"many cells, four paths", 4, []int64{1 << 20}, false, 64},
		{"ragged sizes", 3, []int64{5, 70000, 16<<10 + 1, 300 << 10, 0, 1}, true, 1 + 5 + 2 + 19 + 1},
		{"more ranges than MaxRanges", 2, slices.Repeat([]int64{20000}, 20), false, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTestFabric(t, defaultOpts(tc.paths))
			for _, n := range tc.sizes {
				f.Transfer(0, n, tc.recvFirst)
			}
			settle(t, f)
			requireDelivered(t, f)
			a, b := f.Ends[0].Engine.Stats(), f.Ends[1].Engine.Stats()
			assert.Equal(t, uint64(tc.cells), a.CellsPosted)
			assert.Zero(t, a.CellsReposted)
			assert.Zero(t, a.GiveUps)
			assert.Equal(t, uint64(tc.cells), b.TokensSent)
			assert.Zero(t, b.Duplicates)
			assert.Equal(t, uint64(len(tc.sizes)), a.RangesSent)
			assert.Equal(t, uint64(len(tc.sizes)), b.RangesReceived)
			for _, p := range f.Ends[0].Posts {
				assert.LessOrEqual(t, p.N, int64(16<<10))
			}
		})
	}
}

// The chain of a cell: WRITE of all but the last MTU, then the signaled
// WRITE_WITH_IMM of the last MTU carrying the id; a small cell is the
// WRITE_WITH_IMM alone.
func TestCellChainShape(t *testing.T) {
	e, err := cell.New(cell.Config{Paths: 1, CellSize: 10000, MTU: 4096})
	require.NoError(t, err)
	e.Ready()
	require.NoError(t, e.Send(0, cell.SendRange{Tag: 1, Addr: 0x10000, LKey: 7, Len: 10100}))
	e.Grant(0, cell.Grant{Seq: 0, Addr: 0x90000, RKey: 9, Len: 10100})
	rd := e.Ready()
	require.Len(t, rd.Posts, 2)

	head := rd.Posts[0].WR
	require.Equal(t, verbs.OpWrite, head.Opcode)
	require.Zero(t, head.Flags&verbs.Signaled, "the payload WRITE is silent")
	require.Equal(t, []verbs.SGE{{Addr: 0x10000, Length: 10000 - 4096, LKey: 7}}, head.SGL)
	require.Equal(t, uint64(0x90000), head.RemoteAddr)
	require.Equal(t, uint32(9), head.RKey)
	tail := head.Next
	require.NotNil(t, tail)
	require.Nil(t, tail.Next)
	require.Equal(t, verbs.OpWriteImm, tail.Opcode)
	require.NotZero(t, tail.Flags&verbs.Signaled)
	require.Equal(t, []verbs.SGE{{Addr: 0x10000 + 10000 - 4096, Length: 4096, LKey: 7}}, tail.SGL)
	require.Equal(t, uint64(0x90000+10000-4096), tail.RemoteAddr)
	require.Equal(t, rd.Posts[0].Cell, tail.Imm)

	small := rd.Posts[1].WR
	require.Equal(t, verbs.OpWriteImm, small.Opcode)
	require.Nil(t, small.Next)
	require.Equal(t, []verbs.SGE{{Addr: 0x10000 + 10000, Length: 100, LKey: 7}}, small.SGL)
	require.Equal(t, uint64(0x90000+10000), small.RemoteAddr)
	require.Equal(t, rd.Posts[0].Cell+1, small.Imm)
}

// Nothing is written before the receiver's grant arrives.
func TestSendWaitsForGrant(t *testing.T) {
	o := defaultOpts(2)
	f := newTestFabric(t, o)
	var grantAt int64
	f.Hook = func(m *msg) verdict {
		if m.Kind == celltest.MsgGrant {
			grantAt = f.Now + 3*ms + o.Latency
			return verdict{Delay: 3 * ms}
		}
		return verdict{}
	}
	f.Transfer(0, 200<<10, false)
	settle(t, f)
	requireDelivered(t, f)
	require.NotEmpty(t, f.Ends[0].Posts)
	for _, p := range f.Ends[0].Posts {
		require.GreaterOrEqual(t, p.At, grantAt)
	}
}

// A lost token: the cell's path times out, the cell goes again on the
// other path, the receiver acknowledges both copies and delivers once,
// and the range is handed back only once the first path is reset.
func TestTokenLost(t *testing.T) {
	f := newTestFabric(t, defaultOpts(2))
	dropped := false
	f.Hook = func(m *msg) verdict {
		if m.Kind == celltest.MsgToken && !dropped {
			dropped = true
			return verdict{Drop: true}
		}
		return verdict{}
	}
	x := f.Transfer(0, 10<<10, true)
	settle(t, f)
	requireDelivered(t, f)

	a, b := f.Ends[0], f.Ends[1]
	ids := a.PostedIDs()
	require.Len(t, ids, 1)
	require.Equal(t, 2, b.TokensFor[ids[0]], "both copies acknowledged")
	require.Equal(t, uint64(1), b.Engine.Stats().Duplicates)
	require.Equal(t, uint64(1), a.Engine.Stats().GiveUps)
	require.Equal(t, uint64(1), a.Engine.Stats().CellsReposted)
	require.ErrorIs(t, a.ResetCauses[0], cell.ErrSoftTimeout)
	var pe *cell.PathError
	require.ErrorAs(t, a.ResetCauses[0], &pe)
	require.Equal(t, ids[0], pe.Cell)
	require.Equal(t, "B", pe.Peer)
	resetAt := confirmedAt(a, 0)
	require.NotZero(t, resetAt)
	require.GreaterOrEqual(t, x.SentAt, resetAt, "the sender's quarantine holds until the reset")
	require.GreaterOrEqual(t, x.RecvAt, resetAt)
}

func confirmedAt(en *end, q int) int64 {
	for _, l := range en.Log {
		if l.What == "path "+string(rune('0'+q))+" reset confirmed" {
			return l.At
		}
	}
	return 0
}

// A path dies while a cell is on it: its payload WRITE lands, its
// WRITE_WITH_IMM never does.
func TestQPDeadMidCell(t *testing.T) {
	for _, tc := range []struct {
		name      string
		permanent bool
	}{
		{"path comes back after its reset", false},
		{"path is closed for good", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTestFabric(t, defaultOpts(3))
			cut := false
			f.Hook = func(m *msg) verdict {
				if m.Kind == celltest.MsgCell && m.Path == 1 && f.Now > 100*us && !cut {
					cut = true
					f.Ctl[1].Permanent = tc.permanent
					return verdict{Partial: true}
				}
				return verdict{}
			}
			for range 4 {
				f.Transfer(0, 512<<10, true)
			}
			settle(t, f)
			requireDelivered(t, f)
			require.True(t, cut)
			a := f.Ends[0].Engine
			require.Equal(t, uint64(1), a.Stats().GiveUps)
			require.NotZero(t, a.Stats().CellsReposted)
			if tc.permanent {
				require.Equal(t, cell.PathDead, a.Path(1).State)
			} else {
				require.Equal(t, cell.PathUp, a.Path(1).State)
				require.Equal(t, uint64(1), a.Stats().Readmissions)
			}
		})
	}
}

// A slow path, not a dead one: its cell is re-posted after T_soft, the
// re-post lands first, then the late original lands too. The range is
// delivered once, and neither end hands its memory back before the slow
// path's reset is confirmed (at that end).
func TestSlowPathLateCopy(t *testing.T) {
	for _, tc := range []struct {
		name string
		lag  int64 // the receiver confirms the reset this much later
	}{
		{"both ends confirm together", 0},
		{"receiver confirms later: it holds the range", 2 * ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := defaultOpts(2)
			o.ErrDelay = 5 * ms // the late copy lands while both QPs are still up
			o.ResetDelay = 6 * ms
			o.RecvResetLag = tc.lag
			f := newTestFabric(t, o)
			first := firstCellOn(0)
			var lateAt int64
			f.Hook = func(m *msg) verdict {
				if first(m) {
					lateAt = f.Now + 3*ms
					return verdict{Delay: 3 * ms}
				}
				return verdict{}
			}
			x := f.Transfer(0, 10<<10, true)
			settle(t, f)
			requireDelivered(t, f)

			a, b := f.Ends[0], f.Ends[1]
			ids := a.PostedIDs()
			require.Len(t, ids, 1)
			require.Equal(t, []int{1, 1}, a.CellsOn(), "the original on path 0, the re-post on path 1")
			require.Equal(t, 2, b.TokensFor[ids[0]], "the late original is acknowledged too")
			require.Equal(t, uint64(1), b.Engine.Stats().Duplicates)
			require.Equal(t, uint64(1), b.Engine.Stats().RangesReceived)
			require.Less(t, lateAt, confirmedAt(a, 0), "the late copy landed before the reset")
			require.GreaterOrEqual(t, x.SentAt, confirmedAt(a, 0))
			require.GreaterOrEqual(t, x.RecvAt, confirmedAt(b, 0))
		})
	}
}

func TestNACK(t *testing.T) {
	for _, tc := range []struct {
		name  string
		v     verdict
		isWC  bool
		isTok bool
	}{
		{"error completion", verdict{Fail: true}, true, false},
		{"NACK token", verdict{NACK: true}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTestFabric(t, defaultOpts(2))
			first := firstCellOn(0)
			firstTok := false
			f.Hook = func(m *msg) verdict {
				if tc.isWC && first(m) {
					return tc.v
				}
				if tc.isTok && m.Kind == celltest.MsgToken && m.Path == 0 && !firstTok {
					firstTok = true
					return tc.v
				}
				return verdict{}
			}
			f.Transfer(0, 100<<10, true)
			settle(t, f)
			requireDelivered(t, f)
			a := f.Ends[0]
			require.Equal(t, uint64(1), a.Engine.Stats().GiveUps)
			require.Equal(t, uint64(1), a.Engine.Stats().Readmissions)
			require.ErrorIs(t, a.ResetCauses[0], cell.ErrNACK)
			var wce *verbs.WCError
			require.Equal(t, tc.isWC, errors.As(a.ResetCauses[0], &wce))
		})
	}
}

// Every path dies for good: every range fails, at both ends, with an
// error naming the peer and each path; nothing hangs and nothing is both
// delivered and failed.
func TestAllPathsDead(t *testing.T) {
	f := newTestFabric(t, defaultOpts(3))
	for range 3 {
		f.Transfer(0, 1<<20, true)
	}
	f.At(150*us, func() {
		for q := range 3 {
			f.Kill(q, true)
		}
	})
	settle(t, f)
	requireClean(t, f)
	for _, x := range f.Xfers {
		for _, ev := range []cell.Event{x.Sent[0], x.Recv[0]} {
			require.ErrorIs(t, ev.Err, cell.ErrNoPath)
			var re *cell.RangeError
			require.ErrorAs(t, ev.Err, &re)
			require.Equal(t, x.Tag, re.Tag)
			var np *cell.NoPathError
			require.ErrorAs(t, ev.Err, &np)
			require.Len(t, np.Paths, 3)
			for q, pe := range np.Paths {
				var p *cell.PathError
				require.ErrorAs(t, pe, &p)
				require.Equal(t, q, p.Path)
			}
		}
	}
	a := f.Ends[0].Engine
	msg := f.Xfers[0].Sent[0].Err.Error()
	require.Contains(t, msg, "peer B")
	require.Contains(t, msg, "path 0")
	require.Contains(t, msg, "path 2")
	require.ErrorIs(t, a.Send(f.Now, cell.SendRange{Len: 1}), cell.ErrNoPath)
	require.ErrorIs(t, f.Ends[1].Engine.Recv(f.Now, cell.RecvRange{Len: 1}), cell.ErrNoPath)
}

// A stall of the whole host: the first cell of every path is late, so
// every path times out at once. They are being reset, not lost: the
// cells wait for the first path back, and the connection does not fail.
func TestEveryPathStalledAtOnce(t *testing.T) {
	f := newTestFabric(t, defaultOpts(2))
	first0, first1 := firstCellOn(0), firstCellOn(1)
	f.Hook = func(m *msg) verdict {
		if first0(m) || first1(m) {
			return verdict{Delay: 3 * ms}
		}
		return verdict{}
	}
	f.Transfer(0, 64<<10, true)
	settle(t, f)
	requireDelivered(t, f)
	a := f.Ends[0].Engine
	require.NoError(t, a.Err())
	require.Equal(t, uint64(2), a.Stats().GiveUps, "both paths timed out")
	require.GreaterOrEqual(t, a.Stats().Readmissions, uint64(2), "and came back")
	for _, c := range f.Ends[0].ResetCauses {
		require.ErrorIs(t, c, cell.ErrSoftTimeout)
	}
}

// Ids start just below 2^32 and wrap while cells are in flight; the
// receiver refuses the cell with id 2^32−1 once, which sends its path
// through recovery right at the wrap.
func TestIDWrapAround(t *testing.T) {
	o := defaultOpts(4)
	o.Config.FirstCellID = 1<<32 - 10
	f := newTestFabric(t, o)
	nacked := false
	f.Hook = func(m *msg) verdict {
		if m.Kind == celltest.MsgToken && m.Token.ID == 1<<32-1 && !nacked {
			nacked = true
			return verdict{NACK: true}
		}
		return verdict{}
	}
	for range 3 {
		f.Transfer(0, 300<<10, true)
	}
	settle(t, f)
	requireDelivered(t, f)
	ids := f.Ends[0].PostedIDs()
	require.Len(t, ids, 57)
	require.Equal(t, uint32(1<<32-10), ids[0])
	require.Contains(t, ids, uint32(1<<32-1))
	require.Contains(t, ids, uint32(0))
	require.Equal(t, uint32(46), ids[len(ids)-1])
	require.True(t, nacked)
	a := f.Ends[0].Engine.Stats()
	require.Equal(t, uint64(1), a.GiveUps)
	require.NotZero(t, a.CellsReposted)
	require.NotZero(t, f.Ends[1].Engine.Stats().Duplicates, "the refused copy landed, so its re-post is a duplicate")
}

// Tokens of path 0 are delayed, so tokens of later cells on path 1 arrive
// first: nothing is given up or re-sent, and the ranges wait for the
// earlier cells.
func TestTokensOutOfOrderAcrossPaths(t *testing.T) {
	f := newTestFabric(t, defaultOpts(2))
	f.Hook = func(m *msg) verdict {
		if m.Kind == celltest.MsgToken && m.Path == 0 {
			return verdict{Delay: 150 * us}
		}
		return verdict{}
	}
	f.Transfer(0, 1<<20, true)
	settle(t, f)
	requireDelivered(t, f)
	arr := f.Ends[0].TokenArrivals
	require.False(t, slices.IsSorted(arr), "tokens arrived in id order: the scenario did not reorder")
	a := f.Ends[0].Engine.Stats()
	require.Zero(t, a.GiveUps)
	require.Zero(t, a.CellsReposted)
	require.Zero(t, a.TokensStale)
}

// A path that failed is reset and carries cells again.
func TestReadmissionAfterReset(t *testing.T) {
	f := newTestFabric(t, defaultOpts(2))
	f.At(100*us, func() { f.Kill(1, false) })
	for range 6 {
		f.Transfer(0, 1<<20, true)
	}
	settle(t, f)
	requireDelivered(t, f)
	a := f.Ends[0]
	require.Equal(t, uint64(1), a.Engine.Stats().GiveUps)
	require.Equal(t, uint64(1), a.Engine.Stats().Readmissions)
	back := confirmedAt(a, 1)
	require.NotZero(t, back)
	after := 0
	for _, p := range a.Posts {
		if p.Path == 1 && p.At >= back {
			after++
		}
	}
	require.NotZero(t, after, "path 1 carries cells again after its reset")
	require.Equal(t, cell.PathUp, a.Engine.Path(1).State)
}

// The sender never has more WRITE_WITH_IMM outstanding on a path than the
// receiver has receives posted there (the fabric records a violation when
// one finds none), even with one receive per path and traffic both ways.
func TestFlowControlNeverExceeded(t *testing.T) {
	for _, depth := range []int{1, 2, 8} {
		o := defaultOpts(3)
		o.Config.RecvDepth = depth
		o.Config.CellSize = 4096
		f := newTestFabric(t, o)
		for i := range 10 {
			f.Transfer(i%2, 64<<10, i%3 == 0)
		}
		settle(t, f)
		requireDelivered(t, f)
		for _, en := range f.Ends {
			for q := range 3 {
				require.LessOrEqual(t, en.Engine.Path(q).Cells, depth)
			}
		}
	}
}

// A send range longer than its grant fails at both ends, and writes
// nothing; the next range goes through.
func TestTooLongRange(t *testing.T) {
	f := newTestFabric(t, defaultOpts(2))
	bad := f.TransferInto(0, 100<<10, 50<<10, true)
	f.Transfer(0, 30<<10, true)
	settle(t, f)
	requireClean(t, f)
	require.ErrorIs(t, bad.Sent[0].Err, cell.ErrTooLong)
	require.ErrorIs(t, bad.Recv[0].Err, cell.ErrTooLong)
	require.ErrorIs(t, bad.Recv[0].Err, cell.ErrRemote)
	require.NoError(t, f.Xfers[1].Sent[0].Err)
	require.NoError(t, f.Xfers[1].Recv[0].Err)
	require.Equal(t, uint64(2), f.Ends[0].Engine.Stats().CellsPosted)
}

// A receive range larger than what is sent gets the sent length.
func TestShortSendIntoLargeGrant(t *testing.T) {
	f := newTestFabric(t, defaultOpts(2))
	x := f.TransferInto(0, 20<<10, 64<<10, false)
	settle(t, f)
	requireDelivered(t, f)
	require.Equal(t, int64(20<<10), x.Recv[0].Len)
}

// Once both QPs of a path given up have been through ERR, its old
// incarnation can write nothing more: PathQuiet lifts the quarantine, and
// a range that had a cell on the path finishes over the others long
// before the path itself is back.
func TestQuietPathReleasesRangesBeforeItsReset(t *testing.T) {
	for _, quiet := range []bool{false, true} {
		t.Run(fmt.Sprintf("quiet=%v", quiet), func(t *testing.T) {
			o := defaultOpts(2)
			o.ErrDelay = 1 * ms
			o.ResetDelay = 100 * ms // reconnecting takes long: a route died
			o.Quiet = quiet
			f := newTestFabric(t, o)
			f.Kill(0, false)
			x := f.Transfer(0, 64<<10, true)
			settle(t, f)
			requireDelivered(t, f)
			// The reset started when the path was given up, after the
			// kill; it cannot be back before resetDelay.
			if quiet {
				require.Less(t, x.SentAt, o.ResetDelay, "the send finished before the path was back")
				require.Less(t, x.RecvAt, o.ResetDelay, "the receive finished before the path was back")
			} else {
				require.Greater(t, x.SentAt, o.ResetDelay)
				require.Greater(t, x.RecvAt, o.ResetDelay)
			}
		})
	}
}

// A cell that landed on a QP incarnation since reset, and whose completion
// is read only after the reset began, gets no token and no receive in its
// place: a token posted now would go out on the new incarnation and lie
// in the sender's ring until the same cell is sent on that path again,
// then acknowledge that copy, and every copy before it, unlanded. A cell
// that arrives on the new incarnation before this end hears that the
// reset is done is answered as usual.
func TestStaleArrivalGetsNoToken(t *testing.T) {
	e, err := cell.New(cell.Config{Paths: 2, MTU: 4096, CellSize: 16 << 10, RecvDepth: 4})
	require.NoError(t, err)
	ids := func(wr *verbs.RecvWR) (out []uint64) {
		for ; wr != nil; wr = wr.Next {
			out = append(out, wr.ID)
		}
		return out
	}
	var first []uint64
	for _, r := range e.Ready().Recvs {
		if r.Path == 0 {
			first = ids(r.WR)
		}
	}
	require.Len(t, first, 4)
	arrive := func(now int64, recv uint64, id uint32) *cell.Ready {
		require.NoError(t, e.Completion(now, 0, verbs.WC{ID: recv, Status: verbs.StatusSuccess,
			Opcode: verbs.OpRecvWriteImm, Flags: verbs.WCWithImm, Imm: id, ByteLen: 4096}))
		return e.Ready()
	}
	rd := arrive(1, first[0], 1)
	require.Len(t, rd.Tokens, 1, "an arrival on the current incarnation is answered")
	require.Len(t, rd.Recvs, 1, "and its receive posted again")

	require.NoError(t, e.PathFailed(2, 0, errors.New("reset by the test")))
	rd = e.Ready()
	require.Len(t, rd.Resets, 1)
	next := ids(rd.Resets[0].Refill)
	require.Len(t, next, 4)
	for _, id := range next {
		require.NotContains(t, first, id, "the refill's receives are told apart from the old incarnation's")
	}

	rd = arrive(3, first[1], 2)
	require.Empty(t, rd.Tokens, "an arrival on the reset incarnation gets no token")
	require.Empty(t, rd.Recvs, "nor a receive in its place")
	require.Equal(t, uint64(1), e.Stats().StaleArrivals)

	rd = arrive(4, next[0], 3)
	require.Len(t, rd.Tokens, 1, "an arrival on the new incarnation is answered before PathReset")
	require.Equal(t, 0, rd.Tokens[0].Path)
	require.Len(t, rd.Recvs, 1)
}

// A reset that failed part way starts over: ResetAgain asks for another
// reset of a path that is down, with the refill of yet another
// incarnation, and leaves a path that is up alone.
func TestResetAgain(t *testing.T) {
	e, err := cell.New(cell.Config{Paths: 2, MTU: 4096, CellSize: 16 << 10, RecvDepth: 2})
	require.NoError(t, err)
	e.Ready()
	require.NoError(t, e.ResetAgain(1, 0, errors.New("connect failed")))
	require.Empty(t, e.Ready().Resets, "an up path is not reset")

	require.NoError(t, e.PathFailed(2, 0, errors.New("first")))
	first := e.Ready().Resets
	require.Len(t, first, 1)
	firstIDs := []uint64{first[0].Refill.ID, first[0].Refill.Next.ID}
	require.NoError(t, e.ResetAgain(3, 0, errors.New("connect failed")))
	again := e.Ready().Resets
	require.Len(t, again, 1)
	require.Equal(t, 0, again[0].Path)
	require.ErrorContains(t, again[0].Cause, "connect failed")
	for wr := again[0].Refill; wr != nil; wr = wr.Next {
		require.NotContains(t, firstIDs, wr.ID, "the new attempt's receives are told apart from the failed one's")
	}
	require.ErrorIs(t, e.ResetAgain(4, 2, nil), cell.ErrInvalid)
}
