package verbstest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/stretchr/testify/require"
)

// testConcurrentPost posts chains from several goroutines onto one QP and
// posts receives from several goroutines onto its peer, while two
// goroutines wait on each CQ. Every request must complete exactly once,
// and every chain's bytes must be where it wrote them.
func testConcurrentPost(t *testing.T, p Provider) {
	const (
		posters = 8
		chains  = 64  // per poster
		window  = 8   // chains in flight per poster
		slot    = 512 // bytes per chain
		total   = posters * chains
	)
	e := newEnv(t, p)
	a, b := e.pair(verbs.QPConfig{MaxSendWR: 1024, MaxRecvWR: 1024})
	src := e.region(0, total*slot, verbs.AccessLocalWrite)
	dst := e.region(1, total*slot, remoteRW)
	fill(src.Bytes(), 12)

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	fail := func(err error) {
		select {
		case errs <- err:
		default:
		}
		cancel()
	}

	// Receives first, from four goroutines at once.
	for g := range 4 {
		wg.Go(func() {
			for i := g; i < total; i += 4 {
				if _, err := b.PostRecv(&verbs.RecvWR{ID: uint64(i)}); err != nil {
					fail(fmt.Errorf("post receive %d: %w", i, err))
					return
				}
			}
		})
	}
	waitGroup(t, &wg, "goroutines posting receives")

	// Collectors count every completion they see on one CQ.
	// A tally's context ends when it has seen every completion, which
	// releases the other collector waiting on the same CQ.
	type tally struct {
		ctx  context.Context
		done context.CancelFunc
		mu   sync.Mutex
		seen map[uint64]int
		n    int
	}
	newTally := func() *tally {
		tl := &tally{seen: map[uint64]int{}}
		tl.ctx, tl.done = context.WithCancel(ctx)
		return tl
	}
	count := func(cq verbs.CQ, key func(verbs.WC) uint64, onWC func(verbs.WC), tl *tally) {
		var wc [16]verbs.WC
		for {
			n, err := cq.Wait(tl.ctx, wc[:])
			if err != nil {
				tl.mu.Lock()
				done := tl.n >= total
				tl.mu.Unlock()
				if !done {
					fail(fmt.Errorf("wait: %w", err))
				}
				return
			}
			tl.mu.Lock()
			for _, c := range wc[:n] {
				if c.Status != verbs.StatusSuccess {
					fail(fmt.Errorf("completion %+v", c))
				}
				tl.seen[key(c)]++
				tl.n++
			}
			if tl.n >= total {
				tl.done()
			}
			tl.mu.Unlock()
			for _, c := range wc[:n] {
				onWC(c)
			}
		}
	}
	credits := make([]chan struct{}, posters)
	for g := range credits {
		credits[g] = make(chan struct{}, window)
	}
	sends, imms, recvIDs := newTally(), newTally(), newTally()
	var collectors sync.WaitGroup
	for range 2 {
		collectors.Go(func() {
			count(a.send, func(c verbs.WC) uint64 { return c.ID }, func(c verbs.WC) {
				if g := c.ID >> 32; g < posters {
					select { // never blocks unless a poster gave up
					case credits[g] <- struct{}{}:
					default:
					}
				}
			}, sends)
		})
		collectors.Go(func() {
			count(b.recv, func(c verbs.WC) uint64 { return uint64(c.Imm) }, func(c verbs.WC) {
				recvIDs.mu.Lock()
				recvIDs.seen[c.ID]++
				recvIDs.mu.Unlock()
			}, imms)
		})
	}

	for g := range posters {
		wg.Go(func() {
			for range window {
				credits[g] <- struct{}{}
			}
			for i := range chains {
				select {
				case <-credits[g]:
				case <-ctx.Done():
					return
				}
				k := g*chains + i
				off := k * slot
				wr := chain(
					unsignaled(write(uint64(k), src, off, slot-4, dst, off)),
					writeImm(uint64(g)<<32|uint64(i), src, off+slot-4, 4, dst, off+slot-4, uint32(k)),
				)
				if bad, err := a.PostSend(wr); err != nil {
					fail(fmt.Errorf("poster %d chain %d: bad wr %v: %w", g, i, bad, err))
					return
				}
			}
		})
	}
	waitGroup(t, &wg, "posters")
	waitGroup(t, &collectors, "collectors waiting on the CQs")
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	require.Len(t, sends.seen, total, "distinct send completions")
	require.Len(t, imms.seen, total, "distinct immediates")
	require.Len(t, recvIDs.seen, total, "distinct receives consumed")
	for _, tl := range []*tally{sends, imms, recvIDs} {
		for id, n := range tl.seen {
			require.Equal(t, 1, n, "completions of %#x", id)
		}
	}
	for k := range total {
		off := k * slot
		requireBytes(t, src.Bytes()[off:off+slot], dst.Bytes()[off:off+slot],
			fmt.Sprintf("chain %d (poster %d)", k, k/chains))
	}
}
