package cell_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/cell"
)

// Random configurations, traffic both ways and faults (delays, lost and
// duplicated tokens, NACKs, failed requests, paths dying mid-cell or for
// good, late copies, duplicated grants and finals, arrivals read late,
// tokens posted into a path's next incarnation) never corrupt delivery: every range ends exactly once at each end, delivered intact
// or failed, never both; no write lands outside granted, engine-owned
// memory; no WRITE_WITH_IMM finds its receive queue empty; nothing hangs.
func TestRandomFaultsNeverCorruptDelivery(t *testing.T) {
	seeds := 200
	if testing.Short() || raceEnabled {
		seeds = 60
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			runRandom(t, seed)
		})
	}
}

func runRandom(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	o := defaultOpts(1 + rng.IntN(4))
	o.cfg.RecvDepth = 1 + rng.IntN(8)
	o.cfg.MinSoftTimeout = 300_000
	o.cfg.MaxRanges = []int{1, 2, 4, 8}[rng.IntN(4)]
	o.cfg.Window = []int{8, 16, 64}[rng.IntN(3)]
	o.cfg.FirstCellID = rng.Uint32()
	switch rng.IntN(3) {
	case 0:
		o.cfg.CellSize = 4096
	case 1:
		o.cfg.CellSize = 16 << 10
	default:
		o.cfg.CellSize = 0
		o.cfg.MinCellSize, o.cfg.MaxCellSize, o.cfg.InitialCellSize = 4096, 64<<10, 8192
	}
	pols := []func() cell.Policy{
		func() cell.Policy { return &cell.Adaptive{} },
		func() cell.Policy { return &cell.Spray{} },
		func() cell.Policy { return &cell.ECMP{Key: seed} },
	}
	o.policyA, o.policyB = pols[rng.IntN(3)], pols[rng.IntN(3)]
	o.errDelay = int64(10+rng.IntN(2000)) * us
	o.resetDelay = o.errDelay + int64(10+rng.IntN(2000))*us
	o.recvResetLag = int64(rng.IntN(2)) * ms
	o.quiet = rng.IntN(2) == 0
	o.ring = rng.IntN(4) != 0
	o.lateRecords = rng.IntN(2) == 0
	if rng.IntN(2) == 0 {
		// Well inside the soft timeout's floor: a driver that reads its
		// CQ later than that has every fresh path time out.
		o.cqLag = int64(1+rng.IntN(100)) * us
	}
	for range o.paths {
		o.psPerByte = append(o.psPerByte, []int64{500, 1000, 1000, 5000}[rng.IntN(4)])
	}
	f := newTestFabric(t, o)
	t.Cleanup(func() {
		if t.Failed() {
			f.dumpLogs(t)
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
	p := func(x float64) bool { return f.now < faultsUntil && rng.Float64() < x }
	f.hook = func(m *msg) verdict {
		var v verdict
		switch m.kind {
		case mToken:
			v.drop, v.dup, v.nack = p(0.01), p(0.03), p(0.001*harsh)
			if p(0.05) {
				v.delay = int64(rng.IntN(100)) * us
			}
		case mCell:
			v.fail, v.partial = p(0.001*harsh), p(0.001*harsh)
			if p(0.005 * harsh) {
				v.delay = int64(rng.IntN(1500)) * us // a late copy
			}
		default:
			v.dup = p(0.1)
			if p(0.1) {
				v.delay = int64(rng.IntN(300)) * us
			}
		}
		return v
	}
	for range rng.IntN(1 + int(harsh)/5) {
		q, at, permanent := rng.IntN(o.paths), int64(rng.IntN(20))*ms, rng.IntN(8) == 0
		f.at(at, func() { f.kill(q, permanent) })
	}
	for range 5 + rng.IntN(25) {
		from, n, recvFirst := rng.IntN(2), int64(rng.IntN(300<<10)), rng.IntN(2) == 0
		at := int64(rng.IntN(15)) * ms
		f.at(at, func() { f.transfer(from, n, recvFirst) })
	}
	f.runFor(16 * ms) // every transfer has been submitted
	settle(t, f)
	requireClean(t, f)
	for _, x := range f.xfers {
		if x.recv[0].Err == nil {
			require.NoError(t, x.sent[0].Err, "tag %d delivered although its sender failed it", x.tag)
		}
	}
}
