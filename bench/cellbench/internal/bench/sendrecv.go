package bench

import (
	"context"
	"fmt"
)

// sendRecvTag is the user tag of sendrecv's messages; the collectives use
// a channel of their own, so no tag of theirs can collide with it.
const sendRecvTag = 0x5e4d

// sendRecv sends send to the next rank and receives recv from the
// previous one, as nccl-tests' sendrecv does: every rank both sends and
// receives one message per call.
func (b *bencher) sendRecv(ctx context.Context, send, recv []byte) error {
	next, prev := (b.rank+1)%b.n, (b.rank+b.n-1)%b.n
	rh, err := b.comm.Irecv(prev, sendRecvTag, recv)
	if err != nil {
		return fmt.Errorf("receive from rank %d: %w", prev, err)
	}
	sh, err := b.comm.Isend(next, sendRecvTag, send)
	if err != nil {
		return fmt.Errorf("send to rank %d: %w", next, err)
	}
	if _, err := sh.Wait(ctx); err != nil {
		return fmt.Errorf("send to rank %d: %w", next, err)
	}
	if _, err := rh.Wait(ctx); err != nil {
		return fmt.Errorf("receive from rank %d: %w", prev, err)
	}
	return nil
}
