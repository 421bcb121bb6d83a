package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A burst of CNPs, one per decrease interval, cuts a 100 Gb/s QP to its
// floor. Clamping the target at every cut leaves it there: the target
// climbs back by the additive steps, 100 Mb/s per 300 µs stage. Keeping
// the target through the burst (CLAMP_TARGET_RATE 0) lets each stage take
// the rate halfway back to it. A cut after an increase stage clamps in
// both.
func TestDCQCNTargetThroughABurst(t *testing.T) {
	for _, keep := range []bool{false, true} {
		var d dcqcn
		d.init(100, keep)
		now := int64(0)
		for range 12 {
			d.cnp(now)
			now += dcDecT
		}
		assert.Less(t, d.rc, 0.2, "keep %v: the burst cuts to the floor", keep)
		d.increase(now + 3*dcIncT)
		if keep {
			assert.Greater(t, d.rc, 80.0, "the target was kept: three stages take the rate most of the way back")
		} else {
			assert.Less(t, d.rc, 1.0, "the target was clamped: three stages add tenths of a Gb/s")
		}
		rc := d.rc
		d.cnp(now + 3*dcIncT)
		assert.Equal(t, rc, d.rt, "keep %v: a cut after an increase stage sets the target to the rate it cuts", keep)
	}
}
