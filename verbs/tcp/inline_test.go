package tcp

import (
	"context"
	"encoding/binary"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/verbs"
)

// TestInlineWritesKeepOrder posts many small WRITE_WITH_IMMs from several
// goroutines at once, far more than the sockets buffer, so that posters
// write inline, find the writer role taken, leave partial writes to the
// sender goroutine and race with it. Every request must arrive once, in
// the order of its PSN, with its bytes in place.
func TestInlineWritesKeepOrder(t *testing.T) {
	const (
		posters = 4
		each    = 1000
		size    = 16 << 10
		// The responder posts no receive until this many requests are
		// posted: it stops reading (RNR), the sockets fill, and inline
		// writes come back partial or empty.
		holdUntil = 1500
		total     = posters * each
	)
	e := newEnv(t)
	a, b, pa, pb := e.pair(verbs.QPConfig{RNRRetry: 7, RetryCount: 7, MaxSendWR: 4096, MaxRecvWR: 4096})
	src := e.region(pa, posters*size, verbs.AccessLocalWrite)
	nums := e.region(pa, total*8, verbs.AccessLocalWrite)
	for i := range total {
		binary.LittleEndian.PutUint64(nums.Bytes()[i*8:], uint64(i))
	}
	dst := e.region(pb, total*8, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	big := e.region(pb, posters*size, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)

	// It bounds the whole transfer, not one wait: a hang fails, a slow
	// machine does not.
	ctx, cancel := context.WithTimeout(context.Background(), 6*waitLimit)
	defer cancel()
	// The receiver keeps receives posted and collects the immediates.
	imms := make(chan uint32, total)
	recvDone := make(chan error, 1)
	start := make(chan struct{})
	go func() {
		<-start
		recv := &verbs.RecvWR{}
		for range 1024 {
			if _, err := b.PostRecv(recv); err != nil {
				recvDone <- err
				return
			}
		}
		wc := make([]verbs.WC, 64)
		for got := 0; got < total; {
			n, err := b.recv.Wait(ctx, wc)
			if err != nil {
				recvDone <- err
				return
			}
			for _, c := range wc[:n] {
				if c.Status != verbs.StatusSuccess {
					recvDone <- &verbs.WCError{WC: c}
					return
				}
				imms <- c.Imm
				if _, err := b.PostRecv(recv); err != nil {
					recvDone <- err
					return
				}
			}
			got += n
		}
		recvDone <- nil
	}()

	// Request n writes its number, from a source no later request
	// touches (the payload leaves when the request is written, not when
	// it is posted), into slot n of dst, behind a 16 KiB payload that
	// fills the sockets. Numbers are handed out in posting order.
	var mu sync.Mutex // serialises a poster's two steps: number, post
	var next uint32
	var wg sync.WaitGroup
	for p := range posters {
		wg.Go(func() {
			for range each {
				mu.Lock()
				n := next
				next++
				if n == holdUntil {
					close(start)
				}
				wr := writeWR(uint64(n), verbs.OpWrite, src, p*size, size, big, p*size)
				wr.Flags = 0
				wr.Next = writeWR(uint64(n), verbs.OpWriteImm, nums, int(n)*8, 8, dst, int(n)*8)
				wr.Next.Imm, wr.Next.Flags = n, 0
				for {
					_, err := a.PostSend(wr)
					if err == nil {
						break
					}
					// Full: acknowledgements free slots. The chain is
					// posted again whole; a WRITE posted twice is harmless.
					require.ErrorIs(t, err, verbs.ErrQueueFull)
					runtime.Gosched()
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.NoError(t, <-recvDone)
	close(imms)
	want := uint32(0)
	for imm := range imms {
		require.Equal(t, want, imm, "immediates in PSN order")
		want++
	}
	for i := range total {
		require.Equal(t, uint64(i), binary.LittleEndian.Uint64(dst.Bytes()[i*8:]), "slot %d", i)
	}
}
