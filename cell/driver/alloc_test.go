package driver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Moving a range costs a handful of allocations (its Op, and a wait
// context when the progress goroutine's wait ends by timer, kick or
// landing), however many cells it is cut into: posting cells, handling
// completions and tokens, and waiting for completions allocate nothing.
func TestCellsDoNotAllocate(t *testing.T) {
	const n, cells = 16 << 20, 1024
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.CellSize = n / cells
			// The steady state: no pause of a loaded machine may give a
			// path up, whose reset would allocate.
			cfg.Engine.MinSoftTimeout = time.Minute
			pr := newPairWith(t, p, cfg, false)
			ctx := bounded(t)
			src, dst := pr.a.region(n), pr.b.region(n)
			move := func() {
				r, err := pr.b.conn.Recv(dst, 0, n)
				require.NoError(t, err)
				s, err := pr.a.conn.Send(src, 0, n)
				require.NoError(t, err)
				_, err = s.Wait(ctx)
				require.NoError(t, err)
				_, err = r.Wait(ctx)
				require.NoError(t, err)
			}
			move() // maps the memory, warms the connection up
			before := pr.a.conn.Stats().Engine.CellsPosted
			allocs := testing.AllocsPerRun(3, move)
			posted := float64(pr.a.conn.Stats().Engine.CellsPosted-before) / 4
			t.Logf("%s: %.0f allocations per range of %.0f cells", p.name, allocs, posted)
			require.GreaterOrEqual(t, posted, float64(cells))
			require.Less(t, allocs, posted/4, "far less than one allocation per cell")
		})
	}
}

// Control messages other than endpoints (bells after finals, RTS, dead,
// bye) are sent and read on the data path and allocate nothing. An
// endpoint decoded into the message itself once made every message
// escape to the heap, at both ends.
func TestControlMessagesDoNotAllocate(t *testing.T) {
	b := make([]byte, ctlMsgSize)
	for _, kind := range []msgKind{msgBell, msgRTS, msgDead} {
		allocs := testing.AllocsPerRun(100, func() {
			m := ctlMsg{kind: kind, path: 1, gen: 2, seq: 3}
			n, err := m.encode(b)
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodeCtl(b[:n], 4, "shm")
			if err != nil || got.kind != kind {
				t.Fatal(got, err)
			}
		})
		require.Zero(t, allocs, "%v message", kind)
	}
}
