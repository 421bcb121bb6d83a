package cell_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/cell"
	"github.com/rdmacell/rdmacell/cell/celltest"
)

// trace is what a scenario shows of its engines: the fabric's trace of
// every input and output, in order, and the final counters and paths.
func trace(f *fabric) string {
	out := f.Trace.String()
	for _, en := range f.Ends {
		out += fmt.Sprintf("%s tokens %v stats %+v\n", en.Name, en.TokenArrivals, en.Engine.Stats())
		for q := range f.Opts.Paths {
			out += fmt.Sprintf("%s path %d %+v\n", en.Name, q, en.Engine.Path(q))
		}
	}
	return out
}

// lossyScenario moves three ranges while a token is lost and a cell's
// path fails: timeouts, resets, re-posts and duplicates.
func lossyScenario(t *testing.T, o fabricOpts) string {
	t.Helper()
	f := newTestFabric(t, o)
	n, dropped := 0, false
	f.Hook = func(m *msg) verdict {
		n++
		switch {
		case m.Kind == celltest.MsgToken && n > 6 && !dropped:
			dropped = true
			return verdict{Drop: true}
		case n == 11:
			return verdict{Fail: m.Kind == celltest.MsgCell}
		}
		return verdict{}
	}
	for _, sz := range []int64{100 << 10, 5, 70 << 10} {
		f.Transfer(0, sz, true)
	}
	f.Transfer(1, 40<<10, false)
	settle(t, f)
	requireDelivered(t, f)
	return trace(f)
}

// An engine Reset after any history, into a configuration larger or
// smaller than its last, behaves exactly as a new one.
func TestResetIsNew(t *testing.T) {
	base := defaultOpts(3)
	want := lossyScenario(t, base)

	for _, tc := range []struct {
		name  string
		dirty fabricOpts // the engines' previous connection
	}{
		{"same configuration", base},
		{"from more paths and a larger window", func() fabricOpts {
			o := defaultOpts(6)
			o.Config.Window, o.Config.RecvDepth, o.Config.MaxRanges = 256, 32, 32
			return o
		}()},
		{"from fewer paths and a smaller window", func() fabricOpts {
			o := defaultOpts(1)
			o.Config.Window, o.Config.RecvDepth, o.Config.MaxRanges = 8, 2, 2
			return o
		}()},
		{"from soft-timeout back-off", slowPathOpts(4, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dirty := newTestFabric(t, tc.dirty)
			for _, sz := range []int64{300 << 10, 1, 64 << 10} {
				dirty.Transfer(0, sz, true)
				dirty.Transfer(1, sz/2, false)
			}
			// Stopped mid-flight: cells out, paths down, ranges open.
			dirty.Run(400 * us)
			o := base
			o.Reuse = [2]*cell.Engine{dirty.Ends[0].Engine, dirty.Ends[1].Engine}
			require.Equal(t, want, lossyScenario(t, o))
		})
	}
}

func TestResetInvalidKeepsEngine(t *testing.T) {
	e, err := cell.New(cell.Config{Paths: 2, Peer: "B"})
	require.NoError(t, err)
	require.NoError(t, e.Send(0, cell.SendRange{Tag: 1, Len: 10}))
	before := e.Stats()
	require.ErrorIs(t, e.Reset(cell.Config{Paths: 0}), cell.ErrInvalid)
	require.Equal(t, before, e.Stats())
	require.Equal(t, cell.PathUp, e.Path(1).State)
	_, err = cell.New(cell.Config{Paths: 2, Window: 3})
	require.ErrorIs(t, err, cell.ErrInvalid)
}

// Resetting an engine for a connection of the same shape allocates
// nothing: what a simulator opening a connection per flow relies on.
func TestResetDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	cfg := cell.Config{Peer: "B", Paths: 4, CellSize: 64 << 10, RecvDepth: 16, Window: 32, MaxRanges: 1}
	e, err := cell.New(cfg)
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(100, func() {
		if err := e.Reset(cfg); err != nil {
			panic(err)
		}
		e.Ready()
		if err := e.Send(0, cell.SendRange{Tag: 1, Addr: 1 << 40, LKey: 1, Len: 1 << 20}); err != nil {
			panic(err)
		}
		e.Grant(0, cell.Grant{Seq: 0, Addr: 1 << 41, RKey: 2, Len: 1 << 20})
		e.Ready()
	})
	require.Zero(t, allocs)
}
