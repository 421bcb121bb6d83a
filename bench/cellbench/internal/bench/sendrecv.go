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
// receives one message per call, with one comm.Sendrecv.
func (b *bencher) sendRecv(ctx context.Context, send, recv []byte) error {
	next, prev := (b.rank+1)%b.n, (b.rank+b.n-1)%b.n
	if _, err := b.comm.Sendrecv(ctx, next, sendRecvTag, send, prev, sendRecvTag, recv); err != nil {
		return fmt.Errorf("sendrecv to rank %d from rank %d: %w", next, prev, err)
	}
	return nil
}
