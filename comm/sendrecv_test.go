package comm

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Every rank of a ring shifts a message to its right neighbour and,
// at once, another to its left, with one Sendrecv each, in every size
// class: nothing deadlocks and every message arrives intact.
func TestSendrecvRing(t *testing.T) {
	sizes := []int{0, 1, eagerMax, eagerMax + 1, 1 << 20}
	for _, c := range []struct {
		tr     Transport
		worlds []int
	}{{TransportShm, []int{1, 2, 3, 8}}, {TransportTCP, []int{2, 3}}} {
		for _, n := range c.worlds {
			t.Run(fmt.Sprintf("%s/%d", c.tr, n), func(t *testing.T) {
				comms := startComms(t, n, c.tr, nil)
				onEach(t, comms, func(c *Comm) error {
					ctx := bounded(t)
					r := c.Rank()
					right, left := (r+1)%n, (r+n-1)%n
					for i, size := range sizes {
						for dir, to := range []int{right, left} {
							from := pick(dir == 0, left, right)
							tag := uint64(10*i + dir)
							in := make([]byte, size+3)
							got, err := c.Sendrecv(ctx, to, tag, pattern(size, uint64(1000*r)+tag), from, tag, in)
							if err != nil {
								return fmt.Errorf("%d bytes to rank %d: %w", size, to, err)
							}
							if got != size {
								return fmt.Errorf("received %d bytes from rank %d, want %d", got, from, size)
							}
							if d := firstDiff(in[:size], pattern(size, uint64(1000*from)+tag)); d >= 0 {
								return fmt.Errorf("message of %d bytes from rank %d differs at byte %d", size, from, d)
							}
						}
					}
					return nil
				})
			})
		}
	}
}

// Sendrecv's send and receive tags are independent, and its messages
// match ordinary Send and Recv on the other side.
func TestSendrecvTags(t *testing.T) {
	comms := startComms(t, 2, TransportShm, nil)
	onEach(t, comms, func(c *Comm) error {
		ctx := bounded(t)
		if c.Rank() == 1 {
			// The message with tag 8 is sent first; Sendrecv's receive
			// takes the one with tag 9.
			if err := c.Send(ctx, 0, 8, []byte("eight")); err != nil {
				return err
			}
			if err := c.Send(ctx, 0, 9, []byte("nine")); err != nil {
				return err
			}
			in := make([]byte, 8)
			n, err := c.Recv(ctx, 0, 7, in)
			if err != nil || string(in[:n]) != "seven" {
				return fmt.Errorf("rank 1 received %q, %v", in[:n], err)
			}
			return nil
		}
		in := make([]byte, 8)
		n, err := c.Sendrecv(ctx, 1, 7, []byte("seven"), 1, 9, in)
		if err != nil || string(in[:n]) != "nine" {
			return fmt.Errorf("Sendrecv received %q, %v", in[:n], err)
		}
		n, err = c.Recv(ctx, 1, 8, in)
		if err != nil || string(in[:n]) != "eight" {
			return fmt.Errorf("rank 0 received %q, %v", in[:n], err)
		}
		return nil
	})
}

// Bad arguments fail before anything moves: a peer out of range names
// the half it was for, and a send that cannot start gives the receive up,
// so the message it would have taken goes to the next receive. A receive
// too short for its message fails with a *TruncateError while the send
// half completes; a peer that never sends fails the call when its context
// ends. The communicator works on after each.
func TestSendrecvErrors(t *testing.T) {
	comms := startComms(t, 2, TransportShm, nil)
	c0, c1 := comms[0], comms[1]
	ctx := bounded(t)
	buf := make([]byte, 16)

	_, err := c0.Sendrecv(ctx, 5, 1, buf[:4], 1, 1, buf[4:])
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.Contains(t, err.Error(), "send to peer 5")
	_, err = c0.Sendrecv(ctx, 1, 1, buf[:4], -1, 1, buf[4:])
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.Contains(t, err.Error(), "receive from peer -1")
	_, err = c0.Sendrecv(ctx, 1, 1, buf[:8], 1, 1, buf[4:])
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.Contains(t, err.Error(), "recv overlaps send")

	require.NoError(t, c1.Send(ctx, 0, 1, []byte("after")))
	n, err := c0.Recv(ctx, 1, 1, buf)
	require.NoError(t, err)
	require.Equal(t, "after", string(buf[:n]), "the given-up receive took nothing")

	onEach(t, comms, func(c *Comm) error {
		if c.Rank() == 1 {
			if err := c.Send(ctx, 0, 3, []byte("too long")); err != nil {
				return err
			}
			n, err := c.Recv(ctx, 0, 2, buf)
			if err != nil || string(buf[:n]) != "ping" {
				return fmt.Errorf("rank 1 received %q, %v", buf[:n], err)
			}
			return nil
		}
		_, err := c.Sendrecv(ctx, 1, 2, []byte("ping"), 1, 3, make([]byte, 2))
		var te *TruncateError
		if !errors.As(err, &te) || te.Len != 8 || te.Cap != 2 {
			return fmt.Errorf("Sendrecv: want a truncation, got %v", err)
		}
		return nil
	})

	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	onEach(t, comms, func(c *Comm) error {
		if c.Rank() == 1 {
			_, err := c.Recv(ctx, 0, 4, make([]byte, 1)) // and never sends tag 5
			return err
		}
		_, err := c.Sendrecv(short, 1, 4, []byte("x"), 1, 5, make([]byte, 2))
		if !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("Sendrecv: want the deadline, got %v", err)
		}
		return nil
	})

	require.NoError(t, c0.Send(ctx, 1, 6, []byte("ok")))
	n, err = c1.Recv(ctx, 0, 6, buf)
	require.NoError(t, err)
	require.Equal(t, "ok", string(buf[:n]))
}

func pick[T any](cond bool, a, b T) T {
	if cond {
		return a
	}
	return b
}
