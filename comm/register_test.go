package comm

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRegister: memory of the Go heap, registered, moves a large message
// over tcp with no staging buffer on either side, into a receive from one
// rank and one from any rank; the same message between unregistered
// buffers is staged, so the check can fail. Over shm, registered memory
// is staged, and arrives as well.
func TestRegister(t *testing.T) {
	const size = 4 << 20
	for _, transport := range []Transport{TransportTCP, TransportShm} {
		t.Run(string(transport), func(t *testing.T) {
			comms := startComms(t, 2, transport, nil)
			ctx := bounded(t)
			onEach(t, comms, func(c *Comm) error {
				buf := make([]byte, size)
				if err := c.Register(buf); err != nil {
					return err
				}
				if m := c.Stats().Memory; m.RegisteredBytes != size || m.RegisteredRegions != 1 || m.UserBytes != 0 {
					return fmt.Errorf("after Register: %+v", m)
				}
				want := pattern(size, 7)
				for _, from := range []int{0, AnySource} {
					if c.Rank() == 0 {
						copy(buf, want)
						if err := c.Send(ctx, 1, 1, buf); err != nil {
							return err
						}
						continue
					}
					clear(buf)
					n, err := c.Recv(ctx, from, 1, buf)
					if err != nil {
						return err
					}
					if n != size || !bytes.Equal(buf, want) {
						return fmt.Errorf("received %d bytes, first wrong at %d", n, firstDiff(buf, want))
					}
				}
				m := c.Stats().Memory
				staged := m.SendStaging.Bytes + m.ReceiveStaging.Bytes
				if transport == TransportTCP && staged != 0 {
					return fmt.Errorf("registered memory was staged over tcp: %+v", m)
				}
				if err := c.Unregister(buf[:size/2]); !errors.Is(err, ErrInvalidArgument) {
					return fmt.Errorf("Unregister of half the memory returned %v", err)
				}
				if err := c.Unregister(buf); err != nil {
					return err
				}
				if err := c.Unregister(buf); !errors.Is(err, ErrInvalidArgument) {
					return fmt.Errorf("a second Unregister returned %v", err)
				}
				if m := c.Stats().Memory; m.RegisteredBytes != 0 || m.RegisteredRegions != 0 {
					return fmt.Errorf("after Unregister: %+v", m)
				}
				// Unregistered now: the same message is staged.
				if c.Rank() == 0 {
					return c.Send(ctx, 1, 2, want)
				}
				if _, err := c.Recv(ctx, 0, 2, buf); err != nil || !bytes.Equal(buf, want) {
					return fmt.Errorf("the unregistered receive: %v", err)
				}
				if m := c.Stats().Memory; m.ReceiveStaging.Bytes == 0 {
					return fmt.Errorf("the unregistered receive was not staged: %+v", m)
				}
				return nil
			})
		})
	}
}

// Register refuses what it cannot register: nothing, memory that
// overlaps memory registered already, and memory of Alloc.
func TestRegisterRefuses(t *testing.T) {
	c := startComms(t, 1, TransportTCP, nil)[0]
	buf := make([]byte, 1<<16)
	require.ErrorIs(t, c.Register(nil), ErrInvalidArgument)
	require.NoError(t, c.Register(buf[:1<<15]))
	require.ErrorIs(t, c.Register(buf[1<<14:]), ErrInvalidArgument, "overlapping")
	a, err := c.Alloc(4096)
	require.NoError(t, err)
	require.ErrorIs(t, c.Register(a), ErrInvalidArgument, "memory of Alloc")
	require.ErrorIs(t, c.Free(buf[:1<<15]), ErrInvalidArgument, "Free of registered memory")
	require.ErrorIs(t, c.Unregister(a), ErrInvalidArgument, "Unregister of memory of Alloc")
	require.NoError(t, c.Register(buf[1<<15:]), "the rest, next to it")
	require.Equal(t, int64(1<<16), c.Stats().Memory.RegisteredBytes)
	// Close releases what is still registered.
}
