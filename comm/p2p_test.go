package comm

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var transports = []Transport{TransportShm, TransportTCP}

// Messages of every size class go both ways between two ranks and arrive
// intact: empty, eager, one staged chunk, several chunks.
func TestSendRecvSizes(t *testing.T) {
	sizes := []int{0, 1, 4 << 10, eagerMax, eagerMax + 1, 1 << 20, 3<<20 + 7}
	for _, tr := range transports {
		t.Run(string(tr), func(t *testing.T) {
			comms := startComms(t, 2, tr, nil)
			require.Equal(t, string(tr), comms[0].Transport(1))
			require.Equal(t, "self", comms[0].Transport(0))
			onEach(t, comms, func(c *Comm) error {
				ctx := bounded(t)
				peer := 1 - c.Rank()
				for i, n := range sizes {
					in := make([]byte, n+1)
					s, err := c.Isend(peer, uint64(i), pattern(n, uint64(100*c.Rank()+i)))
					if err != nil {
						return err
					}
					got, err := c.Recv(ctx, peer, uint64(i), in)
					if err != nil {
						return fmt.Errorf("receive %d bytes: %w", n, err)
					}
					if _, err := s.Wait(ctx); err != nil {
						return fmt.Errorf("send %d bytes: %w", n, err)
					}
					if got != n {
						return fmt.Errorf("received %d bytes, want %d", got, n)
					}
					if d := firstDiff(in[:n], pattern(n, uint64(100*peer+i))); d >= 0 {
						return fmt.Errorf("message of %d bytes differs at byte %d", n, d)
					}
				}
				return nil
			})
		})
	}
}

// Receives posted in any order of tags take the messages with their tag;
// messages with one tag arrive in the order they were sent, small and
// large ones mixed.
func TestTagMatchingAnyOrder(t *testing.T) {
	comms := startComms(t, 2, TransportShm, nil)
	const tags, perTag = 5, 3
	size := func(tag, k int) int {
		if (tag+k)%2 == 0 {
			return 100 + tag
		}
		return eagerMax + 1000*tag + k
	}
	onEach(t, comms, func(c *Comm) error {
		ctx := bounded(t)
		if c.Rank() == 0 {
			var hs []*Handle
			for tag := range tags {
				for k := range perTag {
					h, err := c.Isend(1, uint64(tag), pattern(size(tag, k), uint64(10*tag+k)))
					if err != nil {
						return err
					}
					hs = append(hs, h)
				}
			}
			for _, h := range hs {
				if _, err := h.Wait(ctx); err != nil {
					return err
				}
			}
			return nil
		}
		for tag := tags - 1; tag >= 0; tag-- {
			for k := range perTag {
				buf := make([]byte, 64<<10)
				n, err := c.Recv(ctx, 0, uint64(tag), buf)
				if err != nil {
					return err
				}
				if n != size(tag, k) || firstDiff(buf[:n], pattern(n, uint64(10*tag+k))) >= 0 {
					return fmt.Errorf("tag %d message %d: got %d bytes, not the right ones", tag, k, n)
				}
			}
		}
		return nil
	})
}

// On the ordered channel a receive takes the next message whatever its
// tag, and a different tag fails both ends with a *MismatchError, for
// eager and for large messages; the channel's later messages and the user
// channel go on unharmed.
func TestOrderedMismatch(t *testing.T) {
	for _, n := range []int{16, 2 * eagerMax} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			comms := startComms(t, 2, TransportShm, nil)
			onEach(t, comms, func(c *Comm) error {
				ctx := bounded(t)
				p := c.P2P()
				if c.Rank() == 0 {
					user, err := c.Isend(1, 7, []byte("user"))
					if err != nil {
						return err
					}
					s, err := p.Isend(1, 0xA, make([]byte, n))
					if err != nil {
						return err
					}
					_, err = s.Wait(ctx)
					var mis *MismatchError
					if n > eagerMax {
						// The receiver refused it: the sender knows.
						if !errors.As(err, &mis) || mis.Want != 0xB || mis.Got != 0xA || mis.Rank != 1 || mis.Peer != 0 {
							return fmt.Errorf("sender: want a mismatch of 0xb/0xa, got %v", err)
						}
					} else if err != nil {
						return fmt.Errorf("eager sender: %w", err)
					}
					s, err = p.Isend(1, 0xC, []byte("next"))
					if err != nil {
						return err
					}
					if _, err := s.Wait(ctx); err != nil {
						return err
					}
					_, err = user.Wait(ctx)
					return err
				}
				buf := make([]byte, n)
				r, err := p.Irecv(0, 0xB, buf)
				if err != nil {
					return err
				}
				_, err = r.Wait(ctx)
				var mis *MismatchError
				if !errors.As(err, &mis) || *mis != (MismatchError{Rank: 1, Peer: 0, Want: 0xB, Got: 0xA}) {
					return fmt.Errorf("receiver: want a mismatch of 0xb/0xa, got %v", err)
				}
				r, err = p.Irecv(0, 0xC, buf)
				if err != nil {
					return err
				}
				if got, err := r.Wait(ctx); err != nil || string(buf[:got]) != "next" {
					return fmt.Errorf("next ordered message: %d bytes, %v", got, err)
				}
				got, err := c.Recv(ctx, 0, 7, buf)
				if err != nil || string(buf[:got]) != "user" {
					return fmt.Errorf("user message: %d bytes, %v", got, err)
				}
				return nil
			})
		})
	}
}

// A message longer than the receive's buffer fails the receive, and the
// send too when it was large enough to wait for the receiver.
func TestTruncation(t *testing.T) {
	comms := startComms(t, 2, TransportTCP, nil)
	for _, n := range []int{100, 3 * eagerMax} {
		onEach(t, comms, func(c *Comm) error {
			ctx := bounded(t)
			if c.Rank() == 0 {
				err := c.Send(ctx, 1, 3, make([]byte, n))
				if n <= eagerMax {
					return err
				}
				var te *TruncateError
				if !errors.As(err, &te) || te.Len != n || te.Cap != 50 || te.Rank != 1 {
					return fmt.Errorf("sender: want a truncation, got %v", err)
				}
				return nil
			}
			_, err := c.Recv(ctx, 0, 3, make([]byte, 50))
			var te *TruncateError
			if !errors.As(err, &te) || *te != (TruncateError{Rank: 1, Peer: 0, Tag: 3, Len: n, Cap: 50}) {
				return fmt.Errorf("receiver: want a truncation, got %v", err)
			}
			return nil
		})
	}
}

// Buffers from Alloc move without staging; a registered buffer to an
// unregistered one and back moves through staging on one side only.
func TestZeroCopy(t *testing.T) {
	for _, tr := range transports {
		t.Run(string(tr), func(t *testing.T) {
			comms := startComms(t, 2, tr, nil)
			const n = 5<<20 + 3
			onEach(t, comms, func(c *Comm) error {
				ctx := bounded(t)
				buf, err := c.Alloc(n)
				if err != nil {
					return err
				}
				defer c.Free(buf)
				if c.Rank() == 0 {
					fill(buf, 42)
					return c.Send(ctx, 1, 1, buf)
				}
				got, err := c.Recv(ctx, 0, 1, buf)
				if err != nil {
					return err
				}
				if got != n || firstDiff(buf, pattern(n, 42)) >= 0 {
					return fmt.Errorf("zero-copy message wrong (%d bytes)", got)
				}
				return nil
			})
			for _, c := range comms {
				assert.Nil(t, c.w.sendStage.reg, "rank %d used send staging", c.Rank())
				assert.Nil(t, c.w.recvStage.reg, "rank %d used receive staging", c.Rank())
			}
			// Registered at the receiver only: the sender stages.
			onEach(t, comms, func(c *Comm) error {
				ctx := bounded(t)
				if c.Rank() == 0 {
					return c.Send(ctx, 1, 2, pattern(n, 7))
				}
				buf, err := c.Alloc(n)
				if err != nil {
					return err
				}
				defer c.Free(buf)
				if got, err := c.Recv(ctx, 0, 2, buf); err != nil || got != n || firstDiff(buf, pattern(n, 7)) >= 0 {
					return fmt.Errorf("half-registered message: %d bytes, %v", got, err)
				}
				return nil
			})
			assert.NotNil(t, comms[0].w.sendStage.reg)
			assert.Nil(t, comms[1].w.recvStage.reg)
		})
	}
}

// A rank sends to itself on every channel.
func TestSelf(t *testing.T) {
	comms := startComms(t, 1, TransportAuto, nil)
	c := comms[0]
	ctx := bounded(t)
	s, err := c.Isend(0, 1, []byte("hello"))
	require.NoError(t, err)
	buf := make([]byte, 8)
	n, err := c.Recv(ctx, 0, 1, buf)
	require.NoError(t, err)
	require.Equal(t, "hello", string(buf[:n]))
	_, err = s.Wait(ctx)
	require.NoError(t, err)

	p := c.P2P()
	r, err := p.Irecv(0, 9, buf)
	require.NoError(t, err)
	s2, err := p.Isend(0, 8, []byte("x"))
	require.NoError(t, err)
	_, err = r.Wait(ctx)
	var mis *MismatchError
	require.ErrorAs(t, err, &mis)
	_, err = s2.Wait(ctx)
	require.ErrorAs(t, err, &mis)
}

// Bad arguments are errors that name them.
func TestBadArguments(t *testing.T) {
	comms := startComms(t, 2, TransportShm, nil)
	c := comms[0]
	_, err := c.Isend(2, 0, nil)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorContains(t, err, "peer 2")
	_, err = c.P2P().Irecv(-1, 0, nil)
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = c.Alloc(-5)
	require.ErrorIs(t, err, ErrInvalidArgument)
	err = c.Free(make([]byte, 10))
	require.ErrorIs(t, err, ErrInvalidArgument)
	b, err := c.Alloc(0)
	require.NoError(t, err)
	require.NoError(t, c.Free(b))
}

// Ranks on different hosts talk over tcp when the transport is auto, and
// cannot be forced onto shared memory.
func TestHostsPickTransport(t *testing.T) {
	comms := startComms(t, 2, TransportAuto, func(o *Options) {
		o.Host = fmt.Sprint("node-", o.Rank)
		o.TCPAddr = "127.0.0.1"
	})
	for r, c := range comms {
		require.Equal(t, string(TransportTCP), c.Transport(1-r))
		require.Equal(t, 0, c.LocalRank())
		require.Equal(t, 1, c.LocalSize())
	}
	onEach(t, comms, func(c *Comm) error {
		ctx := bounded(t)
		s, err := c.Isend(1-c.Rank(), 1, pattern(1<<20, uint64(c.Rank())))
		if err != nil {
			return err
		}
		buf := make([]byte, 1<<20)
		if _, err := c.Recv(ctx, 1-c.Rank(), 1, buf); err != nil || firstDiff(buf, pattern(1<<20, uint64(1-c.Rank()))) >= 0 {
			return fmt.Errorf("message between hosts: %v", err)
		}
		_, err = s.Wait(ctx)
		return err
	})

	srv := startServer(t)
	job := jobID(t)
	errs := make([]error, 2)
	done := make(chan int, 2)
	for r := range 2 {
		go func() {
			o := testOptions(srv, job, r, 2, TransportShm)
			o.Host = fmt.Sprint("node-", r)
			o.RendezvousTimeout = 5 * time.Second
			_, errs[r] = Init(bounded(t), o)
			done <- r
		}()
	}
	<-done
	<-done
	// A rank that fails leaves the job, so the other may fail on that
	// first; at least one names the other's host.
	named := 0
	for r, err := range errs {
		require.Error(t, err, "rank %d", r)
		var oe *OptionError
		if errors.As(err, &oe) {
			require.Equal(t, "Transport", oe.Field)
			require.ErrorContains(t, err, fmt.Sprintf(`rank %d is on host "node-%d"`, 1-r, 1-r))
			named++
		}
	}
	require.Positive(t, named, "%v", errs)
}

// A receive given up after it matched a large message but before it
// asked for any of its bytes (the pair's bulk connection still being set
// up) refuses the message: its sender fails instead of waiting for
// requests that will never come.
func TestRecvGivenUpBeforeAskingRefusesTheSender(t *testing.T) {
	for round := range 5 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			comms := startComms(t, 2, TransportShm, nil)
			ctx := bounded(t)
			s, err := comms[1].Isend(0, 1, make([]byte, 2*eagerMax))
			require.NoError(t, err)
			// Behind the announcement on the control stream: once it is
			// here, so is the announcement.
			require.NoError(t, comms[1].Send(ctx, 0, 2, nil))
			_, err = comms[0].Recv(ctx, 1, 2, nil)
			require.NoError(t, err)
			_, err = comms[0].Recv(cancelled, 1, 1, make([]byte, 2*eagerMax))
			require.ErrorIs(t, err, context.Canceled)
			if _, err = s.Wait(ctx); err != nil {
				require.ErrorIs(t, err, ErrCancelled)
			}
		})
	}
}
