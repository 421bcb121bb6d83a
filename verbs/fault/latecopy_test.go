package fault_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/rdmacell/rdmacell/verbs/fault"
	"github.com/stretchr/testify/require"
)

// TestLateCopy reproduces the hazard of a slow path that the user gives
// up on: its requests are still in the network, and they land when the
// user moves the QP to ERR or RESET, before that Modify returns. Memory
// reused before then is overwritten by the late copy; memory reused after
// it is not.
func TestLateCopy(t *testing.T) {
	const (
		n     = 8192
		late  = 0x01 // bytes of the given-up requests
		reuse = 0x02 // bytes of the memory's next use
	)
	for _, state := range []verbs.QPState{verbs.StateErr, verbs.StateReset} {
		for _, wrongOrder := range []bool{true, false} {
			name := fmt.Sprintf("%v/reused after Modify", state)
			if wrongOrder {
				name = fmt.Sprintf("%v/reused before Modify", state)
			}
			t.Run(name, func(t *testing.T) {
				f := newFixture(t, verbs.QPConfig{})
				set(f.src.Bytes()[:n], late)
				f.postRecv(f.b, 1)
				// An hour's delay: nothing arrives on its own during the test.
				f.a.Inject(fault.Fault{Kind: fault.Delay, Delay: time.Hour})
				w1 := f.write(1, 0, n/2)
				w1.Flags = 0
				w3 := f.write(3, n-8, 8)
				w3.Flags = 0
				f.post(w1, f.writeImm(2, n/2, n/2-8, 5), w3)
				require.Equal(t, 3, f.a.Stats().Held, "requests on the slow path")
				requireAll(t, f.dst.Bytes()[:n], 0, "target while its requests are on the slow path")

				if wrongOrder {
					// Wrong: the memory the given-up QP targets is
					// reused before that QP's reset is confirmed.
					set(f.dst.Bytes()[:n], reuse)
					require.NoError(t, f.a.Modify(state, nil))
					requireAll(t, f.dst.Bytes()[:n], late, "reused memory, overwritten by the late copy")
				} else {
					require.NoError(t, f.a.Modify(state, nil))
					requireAll(t, f.dst.Bytes()[:n], late, "target when Modify returned")
					set(f.dst.Bytes()[:n], reuse)
					// Anything still on its way would land now.
					time.Sleep(50 * time.Millisecond)
					requireAll(t, f.dst.Bytes()[:n], reuse, "memory reused after Modify returned")
				}
				require.Equal(t, state, f.a.State())
				st := f.a.Stats()
				require.Equal(t, uint64(3), st.Late, "late copies")
				require.Zero(t, st.Held)

				// The late copies complete as the caller asked: only the
				// signaled one, under its own id.
				requireWC(t, waitWCs(t, f.asend, 1, "late copy completions")[0], 2, verbs.StatusSuccess)
				requireNoWC(t, f.asend, "send CQ after the late copies")
				wc := waitWCs(t, f.brecv, 1, "immediate of the late copy")[0]
				requireWC(t, wc, 1, verbs.StatusSuccess)
				require.Equal(t, uint32(5), wc.Imm)
			})
		}
	}
}

// TestLateCopyWhileWaiting gives up on a slow QP while another goroutine
// waits on its send CQ, as a progress engine would: the waiter, not
// Modify, takes the completion that proves the late copies landed, and
// Modify must still learn of it and return.
func TestLateCopyWhileWaiting(t *testing.T) {
	f := newFixture(t, verbs.QPConfig{})
	set(f.src.Bytes()[:4096], 0x03)
	f.a.Inject(fault.Fault{Kind: fault.Delay, Delay: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	type result struct {
		wcs []verbs.WC
		err error
	}
	got := make(chan result, 1)
	go func() {
		wcs, err := collect(ctx, f.asend, 2)
		got <- result{wcs, err}
	}()
	time.Sleep(10 * time.Millisecond) // let it park; the outcome does not depend on it
	f.post(f.write(1, 0, 2048), f.write(2, 2048, 2048))
	require.NoError(t, f.a.Modify(verbs.StateErr, nil))
	requireAll(t, f.dst.Bytes()[:4096], 0x03, "target when Modify returned")
	select {
	case r := <-got:
		require.NoError(t, r.err, "completions taken by the waiting goroutine")
		requireWC(t, r.wcs[0], 1, verbs.StatusSuccess)
		requireWC(t, r.wcs[1], 2, verbs.StatusSuccess)
	case <-time.After(waitTimeout):
		t.Fatalf("the waiting goroutine got no completions within %v", waitTimeout)
	}
}
