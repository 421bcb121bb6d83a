package shm

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/verbs"
)

func TestWritePlacesBytes(t *testing.T) {
	const size = 1 << 20
	a, b := pair(t, size, verbs.QPConfig{})
	fill(a.mem.Bytes(), 3)
	tests := []struct {
		name           string
		srcOff, dstOff int
		n              int
	}{
		{"aligned page", 0, 0, 4096},
		{"unaligned both", 3, 1001, 777},
		{"one byte at end", 17, size - 1, 1},
		{"zero length", 5, 9, 0},
		{"odd size across pages", 4095, 8191, 70001},
		{"whole region", 0, 0, size},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dst := b.mem.Bytes()
			clear(dst)
			post(t, a.qp, write(uint64(i), a.mr, tc.srcOff, b.mr, tc.dstOff, tc.n))
			wc := waitWC(t, a.cq, 1)[0]
			require.Equal(t, verbs.WC{ID: uint64(i), Status: verbs.StatusSuccess, Opcode: verbs.OpWrite, ByteLen: uint32(tc.n), QPN: a.qp.Num()}, wc)
			require.Equal(t, a.mem.Bytes()[tc.srcOff:tc.srcOff+tc.n], dst[tc.dstOff:tc.dstOff+tc.n])
			assert.Zero(t, countNonZero(dst[:tc.dstOff]), "bytes before the target")
			assert.Zero(t, countNonZero(dst[tc.dstOff+tc.n:]), "bytes after the target")
			noWC(t, b.cq)
		})
	}
}

func countNonZero(b []byte) int {
	n := 0
	for _, c := range b {
		if c != 0 {
			n++
		}
	}
	return n
}
