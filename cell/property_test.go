package cell_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/cell"
	"github.com/rdmacell/rdmacell/cell/celltest"
)

// Random configurations, traffic both ways and faults (delays, lost and
// duplicated tokens, NACKs, failed requests, paths dying mid-cell or for
// good, late copies, duplicated grants, finals, holds and hold acks,
// arrivals read late, tokens posted into a path's next incarnation) never
// corrupt delivery: every range ends exactly once at each end, delivered
// intact or failed; no write lands outside granted, engine-owned memory;
// no WRITE_WITH_IMM finds its receive queue empty; nothing hangs.
func TestRandomFaultsNeverCorruptDelivery(t *testing.T) { runSeeds(t, 0, broadMix) }

// The same, aimed at the one-trip path: mostly ranges of one or two cells,
// each handed back on its tail, with tokens lost and cells late often
// enough that most ranges are held after their tail went out, and resets
// in the middle of ranges. A range handed back on its tail must never
// see a write after; one held must wait for its final.
func TestRandomFaultsOnOneTripRanges(t *testing.T) { runSeeds(t, 1_000_000, oneTripMix) }

// The same with small messages only: each a cell of its own, placed on
// the first quick path with its tokens and records (see firstQuick), so a
// fault on that path hits all of them at once, and the others are
// unmeasured when it does.
func TestRandomFaultsOnSmallMessages(t *testing.T) { runSeeds(t, 2_000_000, smallMix) }

// runSeeds runs 1000 seeds from first (60 in short mode or under the race
// detector), in parallel. Together they must take every way a path
// leaves service and comes back: demoted and up again after draining
// (slow, not dead), demoted and given up for showing no progress, given
// up at once and re-admitted.
func runSeeds(t *testing.T, first uint64, mix faultMix) {
	seeds := 1000
	if testing.Short() || raceEnabled {
		seeds = 60
	}
	var mu sync.Mutex
	var total cell.Stats
	t.Cleanup(func() {
		require.Positive(t, total.Demotions, "no path was demoted")
		require.Positive(t, total.Promotions, "no slow path came back without a reset")
		require.Positive(t, total.GiveUps, "no path was given up")
		require.Positive(t, total.Readmissions, "no path was re-admitted")
	})
	for i := range uint64(seeds) {
		t.Run(fmt.Sprint("seed", i), func(t *testing.T) {
			t.Parallel()
			f := runRandom(t, first+i, mix)
			mu.Lock()
			defer mu.Unlock()
			for _, end := range f.Ends {
				st := end.Engine.Stats()
				total.Demotions += st.Demotions
				total.Promotions += st.Promotions
				total.GiveUps += st.GiveUps
				total.Readmissions += st.Readmissions
			}
		})
	}
}

// faultMix is what a random run draws its traffic and faults from.
type faultMix struct {
	maxRange            int     // bytes, exclusive
	tokenDrop, cellLate float64 // chances per message
	lateBy              int     // µs, exclusive
}

var (
	broadMix   = faultMix{maxRange: 300 << 10, tokenDrop: 0.01, cellLate: 0.005, lateBy: 1500}
	oneTripMix = faultMix{maxRange: 24 << 10, tokenDrop: 0.05, cellLate: 0.03, lateBy: 2000}
	smallMix   = faultMix{maxRange: 8<<10 + 1, tokenDrop: 0.05, cellLate: 0.03, lateBy: 2000}
)

func runRandom(t *testing.T, seed uint64, mix faultMix) *fabric {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	o := defaultOpts(1 + rng.IntN(4))
	o.Config.RecvDepth = 1 + rng.IntN(8)
	o.Config.MinSoftTimeout = 300_000
	o.Config.MaxRanges = []int{1, 2, 4, 8}[rng.IntN(4)]
	o.Config.Window = []int{8, 16, 64}[rng.IntN(3)]
	o.Config.FirstCellID = rng.Uint32()
	switch rng.IntN(3) {
	case 0:
		o.Config.CellSize = 4096
	case 1:
		o.Config.CellSize = 16 << 10
	default:
		o.Config.CellSize = 0
		o.Config.MinCellSize, o.Config.MaxCellSize, o.Config.InitialCellSize = 4096, 64<<10, 8192
	}
	pols := []func() cell.Policy{
		func() cell.Policy { return &cell.Adaptive{} },
		func() cell.Policy { return &cell.Spray{} },
		func() cell.Policy { return &cell.ECMP{Key: seed} },
	}
	o.PolicyA, o.PolicyB = pols[rng.IntN(3)], pols[rng.IntN(3)]
	o.ErrDelay = int64(10+rng.IntN(2000)) * us
	o.ResetDelay = o.ErrDelay + int64(10+rng.IntN(2000))*us
	o.RecvResetLag = int64(rng.IntN(2)) * ms
	o.Quiet = rng.IntN(2) == 0
	o.Ring = rng.IntN(4) != 0
	o.LateRecords = rng.IntN(2) == 0
	if rng.IntN(2) == 0 {
		// Well inside the soft timeout's floor: a driver that reads its
		// CQ later than that has every fresh path time out.
		o.CQLag = int64(1+rng.IntN(100)) * us
	}
	for range o.Paths {
		o.PsPerByte = append(o.PsPerByte, []int64{500, 1000, 1000, 5000}[rng.IntN(4)])
	}
	f := newTestFabric(t, o) // a failing seed prints its trace
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d: paths %d, engine %+v, err delay %v, reset delay %v, receiver's reset lag %v, quiet %v, ring %v, late records %v, CQ lag %v, ps/byte %v, policies %T %T",
				seed, o.Paths, o.Config, durNS(o.ErrDelay), durNS(o.ResetDelay), durNS(o.RecvResetLag), o.Quiet, o.Ring, o.LateRecords,
				durNS(o.CQLag), o.PsPerByte, o.PolicyA(), o.PolicyB())
		}
	})

	// One seed in four is harsh: faults that fail paths are ten times as
	// likely, and connections often lose every path. The others mostly
	// recover.
	harsh := 1.0
	if seed%4 == 0 {
		harsh = 10
	}
	const faultsUntil = 30 * ms
	p := func(x float64) bool { return f.Now < faultsUntil && rng.Float64() < x }
	f.Hook = func(m *msg) verdict {
		var v verdict
		switch m.Kind {
		case celltest.MsgToken:
			v.Drop, v.Dup, v.NACK = p(mix.tokenDrop), p(0.03), p(0.001*harsh)
			if p(0.05) {
				v.Delay = int64(rng.IntN(100)) * us
			}
		case celltest.MsgCell:
			v.Fail, v.Partial = p(0.001*harsh), p(0.001*harsh)
			if p(mix.cellLate * harsh) {
				v.Delay = int64(rng.IntN(mix.lateBy)) * us // a late copy
			}
		default:
			v.Dup = p(0.1)
			if p(0.1) {
				v.Delay = int64(rng.IntN(300)) * us
			}
		}
		return v
	}
	for range rng.IntN(1 + int(harsh)/5) {
		q, at, permanent := rng.IntN(o.Paths), int64(rng.IntN(20))*ms, rng.IntN(8) == 0
		f.At(at, func() { f.Kill(q, permanent) })
	}
	for range 5 + rng.IntN(25) {
		from, n, recvFirst := rng.IntN(2), int64(rng.IntN(mix.maxRange)), rng.IntN(2) == 0
		at := int64(rng.IntN(15)) * ms
		f.At(at, func() { f.Transfer(from, n, recvFirst) })
	}
	f.RunFor(16 * ms) // every transfer has been submitted
	settle(t, f)
	requireClean(t, f)
	for _, x := range f.Xfers {
		// A range handed back on its tail may be delivered while its
		// tokens were lost with the connection: the sender then fails it
		// for want of paths, as TCP does data whose acknowledgement a
		// reset lost. It must not fail for anything else.
		if x.Recv[0].Err == nil && x.Sent[0].Err != nil {
			require.ErrorIs(t, x.Sent[0].Err, cell.ErrNoPath, "tag %d delivered although its sender failed it", x.Tag)
		}
	}
	return f
}
