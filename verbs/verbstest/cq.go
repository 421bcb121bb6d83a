package verbstest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/stretchr/testify/require"
)

// waitResult is what a CQ Wait running in a goroutine returned.
type waitResult struct {
	n   int
	err error
}

// waitAsync starts cq.Wait(ctx) and delivers its result.
func waitAsync(ctx context.Context, cq verbs.CQ) <-chan waitResult {
	ch := make(chan waitResult, 1)
	go func() {
		var wc [4]verbs.WC
		n, err := cq.Wait(ctx, wc[:])
		ch <- waitResult{n, err}
	}()
	return ch
}

// result waits up to waitTimeout for a Wait started by waitAsync.
func result(t *testing.T, ch <-chan waitResult, what string) waitResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(waitTimeout):
		require.FailNowf(t, "CQ Wait did not return", "%s: still waiting after %v", what, waitTimeout)
		return waitResult{}
	}
}

func testCQWait(t *testing.T, p Provider) {
	e := newEnv(t, p)
	newCQ := func() verbs.CQ {
		cq, err := e.devs[0].CreateCQ(16)
		require.NoError(t, err)
		return cq
	}

	t.Run("deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		r := result(t, waitAsync(ctx, newCQ()), "Wait with a deadline on an empty CQ")
		require.ErrorIs(t, r.err, context.DeadlineExceeded)
		require.Zero(t, r.n)
	})
	t.Run("cancel while parked", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		ch := waitAsync(ctx, newCQ())
		time.Sleep(10 * time.Millisecond) // long enough to park; either way Wait must return
		cancel()
		r := result(t, ch, "Wait after cancel")
		require.ErrorIs(t, r.err, context.Canceled)
		require.Zero(t, r.n)
	})
	t.Run("already cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r := result(t, waitAsync(ctx, newCQ()), "Wait with a cancelled context")
		require.ErrorIs(t, r.err, context.Canceled)
	})
	t.Run("close while parked", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		cq := newCQ()
		ch := waitAsync(ctx, cq)
		time.Sleep(10 * time.Millisecond)
		require.NoError(t, cq.Close())
		r := result(t, ch, "Wait on a closed CQ")
		require.ErrorIs(t, r.err, verbs.ErrClosed)
	})
	t.Run("wakes on a completion", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		a, _ := e.pair(verbs.QPConfig{})
		src := e.region(0, 4096, verbs.AccessLocalWrite)
		dst := e.region(1, 4096, remoteRW)
		ch := waitAsync(ctx, a.send)
		time.Sleep(10 * time.Millisecond)
		post(t, a, write(1, src, 0, 8, dst, 0))
		r := result(t, ch, "Wait for a WRITE completion")
		require.NoError(t, r.err)
		require.Equal(t, 1, r.n)
	})
}

func testEndpointJSON(t *testing.T, p Provider) {
	e := newEnv(t, p)
	a := e.qp(0, verbs.QPConfig{})
	require.NoError(t, modify(a, verbs.StateInit, nil))
	ep := a.Endpoint()
	require.Equal(t, e.devs[0].Provider(), ep.Provider, "endpoint names its provider")
	require.NotEmpty(t, ep.Provider)
	require.Equal(t, a.Num(), ep.QPN, "endpoint carries the QP number")
	b, err := json.Marshal(ep)
	require.NoError(t, err)
	var back verbs.Endpoint
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, ep, back, "endpoint after a JSON round trip (%s)", b)
}
