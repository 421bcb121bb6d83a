package netlab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// transferTimeout bounds one test transfer.
const transferTimeout = 20 * time.Second

// sink is a TCP server on a lab host that reads each connection to its
// end and then answers one byte, so that a sender knows its bytes have
// crossed the fabric.
type sink struct {
	ln net.Listener
	wg sync.WaitGroup
}

func newSink(l *Lab, host int) (*sink, error) {
	s := &sink{}
	err := l.InHost(host, func() error {
		var err error
		s.ln, err = net.Listen("tcp", netip.AddrPortFrom(l.HostAddr(host), 0).String())
		return err
	})
	if err != nil {
		return nil, err
	}
	s.wg.Go(func() {
		for {
			c, err := s.ln.Accept()
			if err != nil {
				return
			}
			s.wg.Go(func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(transferTimeout))
				if _, err := io.Copy(io.Discard, c); err == nil {
					_, _ = c.Write([]byte{1})
				}
			})
		}
	})
	return s, nil
}

func (s *sink) close() {
	_ = s.ln.Close()
	s.wg.Wait()
}

// dial opens a connection from host from to the sink; its source port is
// the kernel's choice.
func (s *sink) dial(l *Lab, from int) (net.Conn, error) {
	var c net.Conn
	err := l.InHost(from, func() error {
		var err error
		c, err = net.DialTimeout("tcp", s.ln.Addr().String(), 5*time.Second)
		return err
	})
	return c, err
}

// send writes n bytes on c, closes its sending side and waits for the
// sink's answer, for at most d.
func send(c net.Conn, n int, d time.Duration) error {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(d))
	if _, err := c.Write(make([]byte, n)); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		return fmt.Errorf("close write: %w", err)
	}
	var ack [1]byte
	if _, err := io.ReadFull(c, ack[:]); err != nil {
		return fmt.Errorf("wait for the answer: %w", err)
	}
	return nil
}

// transfer sends n bytes from host from to host to over one connection.
func transfer(l *Lab, from, to, n int) error {
	s, err := newSink(l, to)
	if err != nil {
		return err
	}
	defer s.close()
	c, err := s.dial(l, from)
	if err != nil {
		return err
	}
	return send(c, n, transferTimeout)
}

// toLeaf sums, per spine, what the spines sent to leaf.
func toLeaf(t *testing.T, ctx context.Context, l *Lab, leaf int) []uint64 {
	t.Helper()
	counts, err := l.SpineBytes(ctx)
	require.NoError(t, err)
	per := make([]uint64, l.Spines())
	for _, c := range counts {
		if c.Link.Leaf == leaf {
			per[c.Link.Spine] += c.ToLeaf
		}
	}
	return per
}

// TestECMPSpreadsConnections sends over connections from host 0 (leaf 0)
// to host 1 (leaf 1) one at a time and finds, from the spines' byte
// counters, which spine carried each: every connection crosses exactly
// one spine (per-flow hashing), and different source ports land on
// different spines.
func TestECMPSpreadsConnections(t *testing.T) {
	ctx := needLab(t)
	l := upLab(t, ctx, Config{Name: "ecmp", Spines: 4})
	s, err := newSink(l, 1)
	require.NoError(t, err)
	defer s.close()

	const conns, size = 16, 256 << 10
	used := map[int]int{}
	for i := range conns {
		c, err := s.dial(l, 0)
		require.NoError(t, err)
		port := c.LocalAddr().(*net.TCPAddr).Port
		before := toLeaf(t, ctx, l, 1)
		require.NoError(t, send(c, size, transferTimeout), "connection %d", i)
		after := toLeaf(t, ctx, l, 1)
		carrier := -1
		for sp := range after {
			delta := after[sp] - before[sp]
			switch {
			case delta >= size:
				require.Equal(t, -1, carrier, "connection from port %d crossed spines %d and %d", port, carrier, sp)
				carrier = sp
			default:
				// Handshake and teardown of a connection are a few hundred
				// bytes; a share of the payload would be far more.
				assert.Less(t, delta, uint64(size/8), "connection from port %d: spine %d carried part of it", port, sp)
			}
		}
		require.NotEqual(t, -1, carrier, "connection from port %d: no spine carried it", port)
		used[carrier]++
		t.Logf("source port %d: spine %d", port, carrier)
	}
	// 16 connections on one spine of 4 by chance: 4^-15.
	assert.GreaterOrEqual(t, len(used), 2, "every connection hashed onto one spine: %v", used)
}

// TestGrayFailure opens connections from host 0 to host 1, then takes
// spine 0's link to leaf 1 down on the leaf's side: leaf 0 keeps hashing
// the connections it put on spine 0 there, and their data never arrives,
// while the others get through. With the link back up all get through.
func TestGrayFailure(t *testing.T) {
	ctx := needLab(t)
	l := upLab(t, ctx, Config{Name: "gray", Spines: 4})
	s, err := newSink(l, 1)
	require.NoError(t, err)
	defer s.close()

	// 32 connections, none on spine 0 by chance: (3/4)^32 = 1e-4.
	const conns, size = 32, 32 << 10
	open := make([]net.Conn, conns)
	for i := range open {
		open[i], err = s.dial(l, 0)
		require.NoError(t, err)
	}
	link := SpineLink{Spine: 0, Leaf: 1}
	require.NoError(t, l.LinkDown(ctx, link))
	before, err := l.SpineBytes(ctx)
	require.NoError(t, err)
	errs := make([]error, conns)
	var wg sync.WaitGroup
	for i, c := range open {
		wg.Go(func() { errs[i] = send(c, size, 3*time.Second) })
	}
	wg.Wait()
	after, err := l.SpineBytes(ctx)
	require.NoError(t, err)

	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
			var ne net.Error
			assert.True(t, errors.As(err, &ne) && ne.Timeout(), "a stalled connection times out: %v", err)
		}
	}
	assert.Positive(t, failed, "no connection was hashed onto the failed spine")
	assert.Less(t, failed, conns, "every connection failed")
	for i, c := range after {
		t.Logf("%v: to leaf %d, from leaf %d", c.Link, c.ToLeaf-before[i].ToLeaf, c.FromLeaf-before[i].FromLeaf)
		switch c.Link {
		case SpineLink{Spine: 0, Leaf: 0}:
			assert.Greater(t, c.FromLeaf-before[i].FromLeaf, uint64(size), "spine 0 got data from leaf 0")
		case link:
			assert.Zero(t, c.ToLeaf-before[i].ToLeaf, "spine 0 delivered nothing to leaf 1")
		}
	}
	t.Logf("%d of %d connections hashed onto the failed spine", failed, conns)

	require.NoError(t, l.LinkUp(ctx, link))
	for i := range 8 {
		require.NoError(t, transfer(l, 0, 1, size), "connection %d after the link came back", i)
	}
}
