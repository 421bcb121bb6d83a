package cell_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/cell"
)

// A grant or final written again (reemit, after a path came back) must go
// over the path the slot's previous record went over while that path is
// up: RC orders one QP's writes only. On another path the old copy, still
// queued behind cells on its own path, could land after a newer record for
// the same ring slot and overwrite it; the peer would find a stale record
// and wait for ever for the grant or final it lost. Over shared memory,
// where small writes run inline and large ones queue, this stalled
// collectives after a path had been reset.
func TestRingRecordsStayOnTheirSlotPath(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(t *testing.T, e *cell.Engine, now int64)
		paths func(rd *cell.Ready) []int
	}{
		{
			name: "grant",
			write: func(t *testing.T, e *cell.Engine, now int64) {
				require.NoError(t, e.Recv(now, cell.RecvRange{Tag: 1, Addr: 4096, RKey: 7, Len: 4096}))
			},
			paths: func(rd *cell.Ready) []int {
				var ps []int
				for _, g := range rd.Grants {
					ps = append(ps, g.Path)
				}
				return ps
			},
		},
		{
			name: "final",
			write: func(t *testing.T, e *cell.Engine, now int64) {
				// An empty range is done as soon as its grant is in,
				// which writes its final.
				require.NoError(t, e.Send(now, cell.SendRange{Tag: 1, Addr: 4096, LKey: 7, Len: 0}))
				e.Grant(now, cell.Grant{Seq: 0, Addr: 8192, RKey: 9, Len: 4096})
			},
			paths: func(rd *cell.Ready) []int {
				var ps []int
				for _, f := range rd.Finals {
					ps = append(ps, f.Path)
				}
				return ps
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := cell.New(cell.Config{Peer: "B", Paths: 2})
			require.NoError(t, err)
			e.Ready()
			now := int64(1000)
			// Path 0 is down: the record goes over path 1.
			require.NoError(t, e.PathFailed(now, 0, nil))
			e.Ready()
			now++
			tc.write(t, e, now)
			require.Equal(t, []int{1}, tc.paths(e.Ready()))
			// Path 0 comes back and the record is written again; path 0
			// has nothing outstanding, yet the copy follows the first
			// one on path 1.
			now++
			require.NoError(t, e.PathReset(now, 0))
			rd := e.Ready()
			require.Equal(t, []int{1}, tc.paths(rd), "a record written again must not overtake its earlier copy")
		})
	}
}
