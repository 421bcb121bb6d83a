package timeline

import (
	"cmp"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/rdmacell/rdmacell/flight"
	"github.com/stretchr/testify/require"
)

// t0 is the wall clock the synthetic jobs start at.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(ms float64) time.Time { return t0.Add(time.Duration(ms * float64(time.Millisecond))) }

// opSpec describes a synthetic operation; times are in milliseconds from
// t0, end < 0 for one still running.
type opSpec struct {
	comm, seq  uint64
	name       string
	bytes      int64 // 4 MiB if 0
	start, end float64
	state      flight.State
	err        string
	peers      []int // waited on, in this order; the last is the last wait
	dir        flight.Dir
	paths      []uint64 // bytes per path; cells are bytes/4096
	giveUps    uint64
	resets     uint64
}

// mkOp builds the operation s describes. The peers an operation waited on
// are the recorder's to set, so it goes through the file form, as a trace
// read back from disk does.
func mkOp(t testing.TB, id uint64, s opSpec) flight.Op {
	o := flight.Op{Comm: s.comm, Seq: s.seq, Name: s.name, Algorithm: "ring", DType: "float32",
		Bytes: cmp.Or(s.bytes, 4<<20), ID: id, Start: at(s.start), State: s.state, Err: s.err, Peer: -1}
	o.Count = o.Bytes / 4
	if s.state != flight.Running {
		o.End = at(s.end)
	}
	if len(s.peers) > 0 {
		o.Peer, o.Dir, o.Step = s.peers[len(s.peers)-1], s.dir, 2*len(s.peers)
	}
	for i, b := range s.paths {
		o.Traffic.Bytes[i], o.Traffic.Cells[i] = b, b/4096
	}
	o.Traffic.GiveUps, o.Traffic.Resets, o.Traffic.Reposts = s.giveUps, s.resets, 3*s.giveUps
	b, err := json.Marshal(o)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	m["peers"] = s.peers
	b, err = json.Marshal(m)
	require.NoError(t, err)
	var got flight.Op
	require.NoError(t, json.Unmarshal(b, &got))
	return got
}

func mkDump(t testing.TB, job string, rank int, dumpMs float64, reason string, specs ...opSpec) *flight.Dump {
	d := &flight.Dump{Job: job, Rank: rank, Host: "node-" + string(rune('a'+rank/2)), PID: 4000 + rank,
		Reason: reason, Time: at(dumpMs)}
	for i, s := range specs {
		d.Ops = append(d.Ops, mkOp(t, uint64(i+1), s))
	}
	return d
}

// threeRanks is a small job with every case the timeline draws: done,
// failed and running operations, path resets, an operation with no peer,
// and on rank 0 two communicators whose operations overlap in time.
func threeRanks(t testing.TB) []*flight.Dump {
	paths := []uint64{1 << 20, 1 << 20, 0, 512 << 10}
	return []*flight.Dump{
		mkDump(t, "job-7", 0, 100, "requested",
			opSpec{comm: 1, seq: 1, name: "AllReduce", start: 0, end: 10, state: flight.Done, peers: []int{2, 1}, dir: flight.Send, paths: paths},
			opSpec{comm: 2, seq: 1, name: "AllGather", start: 8, end: 14, state: flight.Done, peers: []int{1}, dir: flight.Recv, paths: paths},
			opSpec{comm: 1, seq: 2, name: "Broadcast", start: 12, end: 15, state: flight.Done, peers: []int{1}, dir: flight.Send},
			opSpec{comm: 1, seq: 3, name: "AllReduce", start: 20, end: -1, state: flight.Running, peers: []int{2}, dir: flight.Recv}),
		mkDump(t, "job-7", 1, 101, "requested",
			opSpec{comm: 1, seq: 1, name: "AllReduce", start: 0.5, end: 10, state: flight.Done, peers: []int{0, 2}, dir: flight.Recv,
				paths: paths, giveUps: 1, resets: 1},
			opSpec{comm: 1, seq: 2, name: "Broadcast", start: 12, end: 15.5, state: flight.Done, peers: []int{0}, dir: flight.Recv},
			opSpec{comm: 1, seq: 3, name: "AllReduce", start: 21, end: -1, state: flight.Running, peers: []int{0, 2}, dir: flight.Recv}),
		mkDump(t, "job-7", 2, 99, "failure: AllReduce #3: peer 0: path 1 reset failed",
			opSpec{comm: 1, seq: 0, name: "Barrier", start: 1, end: 2, state: flight.Done},
			opSpec{comm: 1, seq: 1, name: "AllReduce", start: 3, end: 10, state: flight.Done, peers: []int{1, 0}, dir: flight.Send, paths: paths},
			opSpec{comm: 1, seq: 2, name: "Broadcast", start: 13, end: 15, state: flight.Done, peers: []int{0}, dir: flight.Recv},
			opSpec{comm: 1, seq: 3, name: "AllReduce", start: 25, end: 30, state: flight.Failed, err: "peer 0: path 1 reset failed",
				peers: []int{0}, dir: flight.Send, giveUps: 2}),
	}
}

// lateRank is a realistic job of four ranks training in steps: each step
// computes, then reduces its gradients (16 MiB) and its loss (8 bytes)
// over a ring. Rank 2 computes slower and so enters every operation late,
// and the others wait for it; one reduction on rank 1 saw a path reset.
// The last step fails: rank 2 loses its connection to rank 3, and the
// others are still waiting in the reduction when the job is dumped.
func lateRank(t testing.TB) []*flight.Dump {
	const ranks, steps = 4, 30
	rng := rand.New(rand.NewPCG(19, 2))
	specs := make([][]opSpec, ranks)
	now := 0.0
	seq := uint64(0)
	for step := range steps {
		for k, size := range []float64{16 << 20, 8} {
			seq++
			enter := make([]float64, ranks)
			last := 0.0
			for r := range enter {
				enter[r] = now + rng.Float64()*0.3
				if k == 0 {
					enter[r] += 6 // computing
					if r == 2 {
						enter[r] += 1.5 + rng.Float64()*1.5
					}
				}
				last = max(last, enter[r])
			}
			work := 0.05 + size/(8<<30)*1e3 // ms at 8 GiB/s
			reset := step == 17 && k == 0   // rank 1 resets a path: the step takes longer for all
			if reset {
				work += 0.8
			}
			end := last + work
			for r := range ranks {
				sent := uint64(size * 2 * (ranks - 1) / ranks)
				paths := []uint64{sent / 4, sent / 4, sent / 4, sent / 4}
				s := opSpec{comm: 1, seq: seq, name: "AllReduce", bytes: int64(size), start: enter[r], end: end + rng.Float64()*0.05,
					state: flight.Done, peers: []int{(r + 1) % ranks, (r + ranks - 1) % ranks}, dir: flight.Recv, paths: paths}
				if r == 1 && reset {
					s.giveUps, s.resets = 1, 1
					s.paths = []uint64{sent / 3, sent / 3, sent / 12, sent / 4}
				}
				specs[r] = append(specs[r], s)
			}
			now = end + 0.05
		}
		if step%10 == 9 {
			seq++
			for r := range ranks {
				specs[r] = append(specs[r], opSpec{comm: 1, seq: seq, name: "Broadcast", start: now + float64(r)*0.02, end: now + 0.6,
					state: flight.Done, peers: []int{(r + ranks - 1) % ranks}, dir: flight.Recv})
			}
			now += 0.7
		}
	}
	seq++
	fail := now + 6 + 2.2
	for r := range ranks {
		s := opSpec{comm: 1, seq: seq, name: "AllReduce", start: now + 6 + rng.Float64()*0.3, end: -1, state: flight.Running,
			peers: []int{(r + 1) % ranks, (r + ranks - 1) % ranks}, dir: flight.Recv}
		if r == 2 {
			s.start, s.end, s.state, s.err, s.giveUps = fail-0.1, fail+3, flight.Failed, "peer 3: path 1: connection reset by peer", 2
		}
		specs[r] = append(specs[r], s)
	}
	dumps := make([]*flight.Dump, ranks)
	for r := range ranks {
		reason := "failure: peer 2 failed"
		if r == 2 {
			reason = "failure: AllReduce #" + strconv.FormatUint(seq, 10) + ": peer 3: path 1: connection reset by peer"
		}
		dumps[r] = mkDump(t, "train-4x1", r, fail+8, reason, specs[r]...)
	}
	return dumps
}
