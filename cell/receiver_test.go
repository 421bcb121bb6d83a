package cell_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/cell"
	"github.com/rdmacell/rdmacell/verbs"
)

func immWC(id uint32) verbs.WC {
	return verbs.WC{Status: verbs.StatusSuccess, Opcode: verbs.OpRecvWriteImm, Flags: verbs.WCWithImm, Imm: id, ByteLen: 4096}
}

// The receiver half answers each immediate completion: the receive goes
// back on the same path and a token names the copy's fate.
func TestReceiverAnswersArrivals(t *testing.T) {
	var first uint32 = 1<<32 - 2
	e, err := cell.New(cell.Config{Peer: "A", Paths: 2, Window: 16, FirstCellID: first})
	require.NoError(t, err)
	rd := e.Ready()
	require.Len(t, rd.Recvs, 2, "a full receive chain per path at start")
	for q, r := range rd.Recvs {
		require.Equal(t, q, r.Path)
		require.Equal(t, 64, r.Count)
	}

	type arrival struct {
		path int
		wc   verbs.WC
	}
	now := int64(100)
	for _, tc := range []struct {
		name     string
		in       []arrival
		statuses []cell.TokenStatus
		reposts  map[int]int // path → receives reposted
	}{
		{"first copies", []arrival{{0, immWC(first)}, {1, immWC(first + 1)}, {0, immWC(first + 2)}},
			[]cell.TokenStatus{cell.TokenOK, cell.TokenOK, cell.TokenOK}, map[int]int{0: 2, 1: 1}},
		{"a second copy is a duplicate", []arrival{{1, immWC(first)}},
			[]cell.TokenStatus{cell.TokenDup}, map[int]int{1: 1}},
		{"ids across the wrap", []arrival{{0, immWC(3)}, {0, immWC(1)}},
			[]cell.TokenStatus{cell.TokenOK, cell.TokenOK}, map[int]int{0: 2}},
		{"an id no window can hold is refused", []arrival{{1, immWC(first + 1<<20)}},
			[]cell.TokenStatus{cell.TokenNACK}, map[int]int{1: 1}},
		{"send completions carry nothing", []arrival{{0, verbs.WC{Status: verbs.StatusSuccess, Opcode: verbs.OpWriteImm}}},
			nil, map[int]int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := now
			for _, a := range tc.in {
				require.NoError(t, e.Completion(now, a.path, a.wc))
				now++
			}
			rd := e.Ready()
			require.Len(t, rd.Tokens, len(tc.statuses))
			for i, tw := range rd.Tokens {
				require.Equal(t, tc.statuses[i], tw.Token.Status)
				require.Equal(t, tc.in[i].path, tw.Path, "over the path it came on")
				require.Equal(t, tc.in[i].path, tw.Token.Path)
				require.Equal(t, tc.in[i].wc.Imm, tw.Token.ID)
				require.Equal(t, int(tw.Token.ID%16), tw.Slot)
				require.Equal(t, start+int64(i), tw.Token.RxTime)
			}
			got := map[int]int{}
			for _, r := range rd.Recvs {
				k := 0
				for wr := r.WR; wr != nil; wr = wr.Next {
					k++
				}
				require.Equal(t, r.Count, k)
				got[r.Path] += k
			}
			require.Equal(t, tc.reposts, got)
		})
	}
	require.Equal(t, uint64(1), e.Stats().Duplicates)
	require.Equal(t, uint64(1), e.Stats().NACKsSent)
	e.Tick(now)
	require.True(t, e.Ready().Empty(), "nothing happens without input")
}

// A failed completion gives its path up: a Reset with a full refill chain,
// and the cells it held go again elsewhere, once the receiver has held
// their range (its tail went out with its last cell).
func TestFailedCompletionGivesPathUp(t *testing.T) {
	e, err := cell.New(cell.Config{Peer: "B", Paths: 2, CellSize: 8192, RecvDepth: 4})
	require.NoError(t, err)
	e.Ready()
	require.NoError(t, e.Send(0, cell.SendRange{Tag: 1, Addr: 1 << 30, Len: 4 * 8192}))
	e.Grant(0, cell.Grant{Seq: 0, Addr: 1 << 31, Len: 4 * 8192})
	rd := e.Ready()
	require.Len(t, rd.Posts, 4)
	var onZero []uint32
	addr := map[uint32][2]uint64{} // local and remote address of each cell
	for _, p := range rd.Posts {
		addr[p.Cell] = [2]uint64{p.WR.SGL[0].Addr, p.WR.RemoteAddr}
		if p.Path == 0 {
			onZero = append(onZero, p.Cell)
		}
	}
	require.NotEmpty(t, onZero)

	require.NoError(t, e.Completion(10, 0, verbs.WC{ID: rd.Posts[0].WR.ID, Status: verbs.StatusRetryExceeded, Opcode: verbs.OpWrite}))
	rd = e.Ready()
	require.Len(t, rd.Resets, 1)
	require.Equal(t, 0, rd.Resets[0].Path)
	k := 0
	for wr := rd.Resets[0].Refill; wr != nil; wr = wr.Next {
		k++
	}
	require.Equal(t, 4, k)
	require.ErrorIs(t, rd.Resets[0].Cause, cell.ErrNACK)
	var wce *verbs.WCError
	require.ErrorAs(t, rd.Resets[0].Cause, &wce)
	require.Equal(t, verbs.StatusRetryExceeded, wce.WC.Status)
	require.Equal(t, cell.PathDown, e.Path(0).State)
	require.Equal(t, uint64(1), e.Path(0).GiveUps)
	require.Zero(t, e.Path(0).SoftTimeouts, "given up for an error, not a timeout")
	require.Empty(t, rd.Posts, "no cell of a tailed range goes twice before the receiver holds it")
	require.Equal(t, []cell.HoldWrite{{Path: 1, Slot: 0, Hold: cell.Hold{Seq: 0, Path: 1}}}, rd.Holds)
	e.HoldAck(20, cell.HoldAck{Seq: 0})
	rd = e.Ready()
	// The cells path 0 held go again, on path 1: new requests, same memory.
	var again []uint32
	for _, p := range rd.Posts {
		require.Equal(t, 1, p.Path)
		require.Equal(t, addr[p.Cell], [2]uint64{p.WR.SGL[0].Addr, p.WR.RemoteAddr}, "zero copy: the same memory")
		again = append(again, p.Cell)
	}
	require.Equal(t, onZero, again)
	require.Equal(t, uint64(len(onZero)), e.Stats().CellsReposted)
}
