package driver

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Ranges of awkward sizes go both ways, several in flight at once, and
// arrive intact.
func TestTransferSizes(t *testing.T) {
	sizes := []int{0, 1, 4095, 4096, 4097, 64 << 10, 1<<20 + 3}
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.CellSize = 64 << 10
			pr := newPair(t, p, cfg)
			ctx := bounded(t)
			for dir, ends := range [][2]*end{{pr.a, pr.b}, {pr.b, pr.a}} {
				from, to := ends[0], ends[1]
				total := 0
				for _, n := range sizes {
					total += n
				}
				src, dst := from.region(total+1), to.region(total+1)
				fill(src.Bytes(), uint64(dir+1))
				var sends, recvs []*Op
				off := 0
				for _, n := range sizes {
					r, err := to.conn.Recv(dst, off, n)
					require.NoError(t, err)
					recvs = append(recvs, r)
					s, err := from.conn.Send(src, off, n)
					require.NoError(t, err)
					sends = append(sends, s)
					off += n
				}
				for i, n := range sizes {
					got, err := sends[i].Wait(ctx)
					require.NoError(t, err, "send %d of %d bytes", i, n)
					require.Equal(t, n, got)
					got, err = recvs[i].Wait(ctx)
					require.NoError(t, err, "receive %d of %d bytes", i, n)
					require.Equal(t, n, got)
				}
				require.Equal(t, -1, firstDiff(src.Bytes()[:total], dst.Bytes()[:total]), "direction %d", dir)
			}
		})
	}
}
