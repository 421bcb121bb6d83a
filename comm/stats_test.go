package comm

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/flight"
	"github.com/rdmacell/rdmacell/internal/hostseg"
)

// After known traffic between two ranks, Stats counts exactly the
// messages and bytes each sent and received, the operations recorded, the
// memory handed out and the staging buffers a large unregistered message
// needed; every link shows its paths up with the cells and bytes the
// process's traffic counters saw.
func TestStatsAfterKnownTraffic(t *testing.T) {
	for _, tr := range transports {
		t.Run(string(tr), func(t *testing.T) {
			comms := startComms(t, 2, tr, nil)
			ctx := bounded(t)
			a, b := comms[0], comms[1]

			before := a.Stats()
			require.Equal(t, 0, before.Rank)
			require.Len(t, before.Peers, 2)
			require.False(t, before.Peers[1].Connected, "no operation has needed the peer yet")
			require.Empty(t, before.Peers[1].Links)
			require.Equal(t, "self", before.Peers[0].Transport)
			require.Equal(t, string(tr), before.Peers[1].Transport)
			require.Empty(t, before.Ops)

			// A receive posted and not yet matched is a live handle.
			reg, err := b.Alloc(1 << 20)
			require.NoError(t, err)
			h, err := b.Irecv(0, 7, reg[:100])
			require.NoError(t, err)
			require.Equal(t, 1, b.Stats().Peers[0].LiveHandles)

			const small, large, n = 100, 5 << 20, 10
			big := make([]byte, large) // unregistered: it moves through staging
			onEach(t, comms, func(c *Comm) error {
				if c.Rank() == 0 {
					if err := c.Send(ctx, 1, 7, make([]byte, small)); err != nil {
						return err
					}
					for range n {
						if err := c.Send(ctx, 1, 8, make([]byte, small)); err != nil {
							return err
						}
					}
					return c.Send(ctx, 1, 9, big)
				}
				if _, err := h.Wait(ctx); err != nil {
					return err
				}
				buf := make([]byte, small)
				for range n {
					if _, err := c.Recv(ctx, 0, 8, buf); err != nil {
						return err
					}
				}
				_, err := c.Recv(ctx, 0, 9, make([]byte, large))
				return err
			})

			rec := a.Recorder()
			op := rec.Begin(&flight.Op{Name: "TestOp", Bytes: 8})
			rec.End(op, nil)
			op = rec.Begin(&flight.Op{Name: "TestOp", Bytes: 8})
			rec.End(op, errors.New("failed on purpose"))
			op = rec.Begin(&flight.Op{Name: "TestOp", Bytes: 2 << 20})
			rec.End(op, nil)

			sa, sb := a.Stats(), b.Stats()
			pa, pb := sa.Peers[1], sb.Peers[0]
			require.True(t, pa.Connected)
			require.Empty(t, pa.Err)
			require.Equal(t, uint64(n+2), pa.SentMessages)
			require.Equal(t, uint64((n+1)*small+large), pa.SentBytes)
			require.Zero(t, pa.ReceivedMessages)
			require.Equal(t, uint64(n+2), pb.ReceivedMessages)
			require.Equal(t, uint64((n+1)*small+large), pb.ReceivedBytes)
			require.Zero(t, pb.SentMessages)
			require.Zero(t, pb.LiveHandles)
			require.Zero(t, sa.Peers[0].SentMessages, "nothing went to self")

			require.Equal(t, []OpStats{
				{Op: "TestOp", Size: "le1KiB", MaxBytes: 1 << 10, Count: 2, Failed: 1},
				{Op: "TestOp", Size: "le16MiB", MaxBytes: 16 << 20, Count: 1},
			}, withoutTimes(sa.Ops))
			for _, o := range sa.Ops {
				var k uint64
				for _, c := range o.Buckets {
					k += c
				}
				require.Equal(t, o.Count, k, "%s %s: every operation is in a bucket", o.Op, o.Size)
			}
			require.Empty(t, sb.Ops, "each process has its own recorder")

			require.Equal(t, int64(1<<20), sb.Memory.UserBytes)
			require.Equal(t, 1, sb.Memory.UserRegions)
			require.Zero(t, sa.Memory.UserBytes)
			require.Positive(t, sa.Memory.InternalBytes, "control slots")
			for _, st := range []StagingStats{sa.Memory.SendStaging, sb.Memory.ReceiveStaging} {
				require.Equal(t, StagingStats{Bytes: stageChunk * stageBuffers, Buffers: stageBuffers}, st)
			}
			require.Zero(t, sa.Memory.ReceiveStaging, "rank 0 received nothing large")

			require.Len(t, pa.Links, 2)
			require.Equal(t, LinkControl, pa.Links[0].Name)
			require.Equal(t, LinkBulk, pa.Links[1].Name)
			var cells, bytes uint64
			for _, l := range pa.Links {
				require.Len(t, l.Paths, 2)
				// A loaded machine may make a path late: it is then
				// demoted, and up again once drained, or given up, which
				// is counted on it and on its link alike.
				var giveUps uint64
				for i, p := range l.Paths {
					require.Equal(t, i, p.Index)
					require.Contains(t, []string{PathUp, PathSlow, PathDown, PathResetting}, p.State)
					if p.GiveUps == 0 && p.SoftTimeouts == 0 {
						require.Equal(t, PathUp, p.State)
					}
					require.LessOrEqual(t, p.Promotions, p.SoftTimeouts, "every promotion follows a demotion")
					giveUps += p.GiveUps
					cells, bytes = cells+p.CellsPosted, bytes+p.BytesPosted
					if p.Samples > 0 {
						require.Positive(t, p.SRTT)
						require.GreaterOrEqual(t, p.SoftTimeout, p.SRTT)
					}
					if p.Samples >= 3 {
						require.Positive(t, p.LateMargin, "measured from the third token on")
					}
				}
				require.Equal(t, l.GiveUps, giveUps, "link %s", l.Name)
			}
			for _, l := range pa.Links {
				var tokens uint64
				for _, p := range l.Paths {
					tokens += p.Tokens
				}
				require.Equal(t, l.TokensAccepted, tokens, "link %s: every token is counted on its path", l.Name)
			}
			bulk := pa.Links[1]
			require.Positive(t, bulk.TokensAccepted)
			require.GreaterOrEqual(t, bulk.CellsPosted, uint64(large/stageChunk+1), "the large message went on the bulk link")
			var bulkBytes uint64
			for _, p := range bulk.Paths {
				bulkBytes += p.BytesPosted
			}
			require.GreaterOrEqual(t, bulkBytes, uint64(large))
			require.Equal(t, sumOf(sa.Traffic.PathCells), cells, "rank 0 has no other connection")
			require.Equal(t, sumOf(sa.Traffic.PathBytes), bytes)
			require.Len(t, sa.Traffic.PathBytes, 2)
		})
	}
}

// Stats of a closed communicator still answers, with what it had.
func TestStatsAfterClose(t *testing.T) {
	comms := startComms(t, 2, TransportShm, nil)
	ctx := bounded(t)
	onEach(t, comms, func(c *Comm) error {
		if c.Rank() == 0 {
			return c.Send(ctx, 1, 1, []byte("x"))
		}
		_, err := c.Recv(ctx, 0, 1, make([]byte, 1))
		return err
	})
	closeAll(t, comms)
	s := comms[0].Stats()
	require.Equal(t, uint64(1), s.Peers[1].SentMessages)
	require.Zero(t, s.Memory.InternalRegions, "Close released every region")
}

func withoutTimes(ops []OpStats) []OpStats {
	out := make([]OpStats, len(ops))
	for i, o := range ops {
		o.Sum, o.Buckets = 0, [flight.NumBuckets]uint64{}
		out[i] = o
	}
	return out
}

func sumOf(v []uint64) uint64 {
	var s uint64
	for _, x := range v {
		s += x
	}
	return s
}

// The host memory the process shares is in Stats while it is mapped.
func TestStatsHostSegments(t *testing.T) {
	comms := startComms(t, 1, TransportShm, nil)
	defer closeAll(t, comms)
	before := comms[0].Stats().Memory
	seg, err := hostseg.Create(1 << 20)
	require.NoError(t, err)
	m := comms[0].Stats().Memory
	require.Equal(t, before.HostSegments+1, m.HostSegments)
	require.Equal(t, before.HostSegmentBytes+1<<20, m.HostSegmentBytes)
	require.NoError(t, seg.Close())
	m = comms[0].Stats().Memory
	require.Equal(t, before.HostSegments, m.HostSegments)
	require.Equal(t, before.HostSegmentBytes, m.HostSegmentBytes)
}
