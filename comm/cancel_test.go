package comm

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// TestCancel gives up operations that nothing would complete: a receive
// from one peer, one from any rank, and a large send no receive takes.
// Each finishes with an error wrapping the cause, the receives take no
// message (the next receive gets what is sent after), and a completed
// operation is not changed by Cancel.
func TestCancel(t *testing.T) {
	for _, transport := range []Transport{TransportShm, TransportTCP} {
		t.Run(string(transport), func(t *testing.T) {
			comms := startComms(t, 2, transport, nil)
			ctx := bounded(t)
			cause := errors.New("the caller's reason")
			onEach(t, comms, func(c *Comm) error {
				if c.Rank() == 1 {
					// Told that rank 0 gave up both receives, send what
					// the next receives must take.
					if _, err := c.Recv(ctx, 0, 1, nil); err != nil {
						return err
					}
					if err := c.Send(ctx, 0, 5, []byte("five")); err != nil {
						return err
					}
					if err := c.Send(ctx, 0, 6, []byte("six")); err != nil {
						return err
					}
					// The large send rank 0 gives up is never received
					// here; this one is.
					_, err := c.Recv(ctx, 0, 8, make([]byte, 16))
					return err
				}
				buf := make([]byte, 16)
				one, err := c.Irecv(1, 5, buf)
				if err != nil {
					return err
				}
				any, err := c.Irecv(AnySource, 6, buf)
				if err != nil {
					return err
				}
				for _, h := range []*Handle{one, any} {
					h.Cancel(cause)
					h.Cancel(errors.New("a second call changes nothing"))
					if _, err := h.Wait(ctx); !errors.Is(err, cause) {
						return fmt.Errorf("a cancelled receive returned %v, want the cause", err)
					}
				}
				if err := c.Send(ctx, 1, 1, nil); err != nil {
					return err
				}
				for tag, want := range map[uint64]string{5: "five", 6: "six"} {
					st, err := c.RecvStatus(ctx, AnySource, tag, buf)
					if err != nil || st.Source != 1 || !bytes.Equal(buf[:st.Len], []byte(want)) {
						return fmt.Errorf("after the cancelled receives, tag %d received %q from %d (%v), want %q", tag, buf[:st.Len], st.Source, err, want)
					}
				}
				big, err := c.Isend(1, 7, make([]byte, 1<<20))
				if err != nil {
					return err
				}
				big.Cancel(cause)
				if _, err := big.Wait(ctx); !errors.Is(err, cause) {
					return fmt.Errorf("a cancelled send returned %v, want the cause", err)
				}
				small, err := c.Isend(1, 8, []byte("eight"))
				if err != nil {
					return err
				}
				n, err := small.Wait(ctx)
				if err != nil || n != 5 {
					return fmt.Errorf("send after the cancelled one: %d bytes, %v", n, err)
				}
				small.Cancel(cause)
				if n, err := small.Wait(ctx); err != nil || n != 5 {
					return fmt.Errorf("Cancel changed a completed send: %d bytes, %v", n, err)
				}
				return nil
			})
		})
	}
}
