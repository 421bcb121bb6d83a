package cell_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/cell"
	"github.com/rdmacell/rdmacell/verbs"
)

// The protocol scenarios are scripts (testdata/*.txt, see TestScripts);
// what is left here are the helpers the Go tests on the fabric share and
// the checks of one engine's outputs that a trace does not show.

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
