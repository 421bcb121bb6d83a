package shm

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/verbs"
)

// TestHotPathsDoNotAllocate posts, executes and completes requests (WRITE,
// WRITE_WITH_IMM with its receive, SEND) and counts allocations in the
// whole process: posting, the engines' copies and the completions.
func TestHotPathsDoNotAllocate(t *testing.T) {
	a, b := pair(t, 1<<16, verbs.QPConfig{})
	wc := make([]verbs.WC, 4)
	poll := func(cq verbs.CQ) {
		// AllocsPerRun runs on one P: yield so that the engines run.
		for cq.Poll(wc[:1]) == 0 {
			runtime.Gosched()
		}
	}
	recv := &verbs.RecvWR{ID: 1, SGL: sge(b.mr, 0, 4096)}
	tests := []struct {
		name string
		wr   *verbs.SendWR
		recv bool
	}{
		{"WRITE", write(1, a.mr, 3, b.mr, 5, 4000), false},
		{"WRITE_WITH_IMM", writeImm(2, a.mr, 0, b.mr, 0, 64, 7), true},
		{"SEND", &verbs.SendWR{ID: 3, Opcode: verbs.OpSend, Flags: verbs.Signaled, SGL: sge(a.mr, 0, 100)}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			run := func() {
				if tc.recv {
					if _, err := b.qp.PostRecv(recv); err != nil {
						panic(err)
					}
				}
				if _, err := a.qp.PostSend(tc.wr); err != nil {
					panic(err)
				}
				poll(a.cq)
				if tc.recv {
					poll(b.cq)
				}
			}
			run() // the first WRITE maps the peer's memory
			require.Zero(t, testing.AllocsPerRun(200, run))
		})
	}
}
