package traffic

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestCheckNamesStaleRuns: a result whose blocks hold an older
// iteration's values, or the zero of a fresh buffer, is caught, with the
// runs of wrong elements as byte ranges and the iteration the first one
// came from.
func TestCheckNamesStaleRuns(t *testing.T) {
	const n, r, count = 2, 1, 64
	for _, tt := range []struct {
		name      string
		op        Op
		staleIter int
		zero      bool
		runs      string
		iter      string
	}{
		{"allreduce, previous iteration", AllReduce, 2, false, "40+24,128+4", "2"},
		{"alltoall, two iterations back", AllToAll, 1, false, "40+24,128+4", "1"},
		{"alltoall, never landed", AllToAll, 0, true, "40+24,128+4", "init"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			const it = 3
			recv := make([]float32, count)
			for i := range recv {
				recv[i] = expected(tt.op, i, count/n, r, n, it)
			}
			// Elements 10..15 and 32 are stale.
			for _, i := range []int{10, 11, 12, 13, 14, 15, 32} {
				recv[i] = expected(tt.op, i, count/n, r, n, tt.staleIter)
				if tt.zero {
					recv[i] = 0
				}
			}
			wrong, first := check(tt.op, recv, r, n, it)
			assert.EqualValues(t, 7, wrong)
			assert.Equal(t, 10, first.Index)
			assert.Equal(t, tt.runs, runsText(first.Runs, wrong))
			assert.Equal(t, tt.iter, valueIter(tt.op, first, count/n, r, n, it))
		})
	}
}

// TestCheckRightResult: the expected values pass the check.
func TestCheckRightResult(t *testing.T) {
	for _, op := range []Op{AllReduce, AllToAll} {
		recv := make([]float32, 48)
		for i := range recv {
			recv[i] = expected(op, i, 16, 2, 3, 5)
		}
		wrong, _ := check(op, recv, 2, 3, 5)
		assert.Zero(t, wrong, "%s", op)
	}
}

// TestRunsTextElides: more wrong elements than the runs hold end in "...".
func TestRunsTextElides(t *testing.T) {
	assert.Equal(t, "0+8,...", runsText([]Span{{0, 2}}, 5))
}
