package comm

import (
	"bufio"
	"context"
	"errors"
	"fmt"

	"github.com/rdmacell/rdmacell/bootstrap"
)

// scenarioExchange is everything a job of four ranks does on one
// transport: zero-copy and staged rings of many sizes, receives in any
// order of tags, a mismatch on the ordered channel, and a split.
func scenarioExchange(ctx context.Context, c *Comm, _ *bufio.Scanner) error {
	n, me := c.Size(), c.Rank()
	next, prev := (me+1)%n, (me+n-1)%n

	// Zero copy first, while no staging buffer exists.
	const zn = 8<<20 + 5
	out, err := c.Alloc(zn)
	if err != nil {
		return err
	}
	in, err := c.Alloc(zn)
	if err != nil {
		return err
	}
	fill(out, uint64(me))
	if err := ringExchange(ctx, c, 100, out, in); err != nil {
		return fmt.Errorf("zero-copy ring: %w", err)
	}
	if firstDiff(in, pattern(zn, uint64(prev))) >= 0 {
		return errors.New("zero-copy ring: wrong bytes")
	}
	if c.w.sendStage.reg != nil || c.w.recvStage.reg != nil {
		return errors.New("zero-copy ring: staging buffers were used")
	}
	if err := c.Free(out); err != nil {
		return err
	}
	if err := c.Free(in); err != nil {
		return err
	}

	// Rings of caller memory; one of 64 MiB, on shared memory only, to
	// keep the test short.
	sizes := []int{0, 1, 4 << 10, 1 << 20, 5<<20 + 3}
	if c.Transport(next) == string(TransportShm) {
		sizes = append(sizes, 64<<20)
	}
	for i, size := range sizes {
		in := make([]byte, size)
		if err := ringExchange(ctx, c, uint64(i), pattern(size, uint64(1000*i+me)), in); err != nil {
			return fmt.Errorf("ring of %d bytes: %w", size, err)
		}
		if d := firstDiff(in, pattern(size, uint64(1000*i+prev))); d >= 0 {
			return fmt.Errorf("ring of %d bytes: differs at byte %d", size, d)
		}
	}

	// Tags received in the reverse order of sending.
	var sends []*Handle
	for tag := range 5 {
		h, err := c.Isend(next, uint64(200+tag), pattern(tagSize(tag), uint64(tag*10+me)))
		if err != nil {
			return err
		}
		sends = append(sends, h)
	}
	for tag := 4; tag >= 0; tag-- {
		buf := make([]byte, 1<<20)
		got, err := c.Recv(ctx, prev, uint64(200+tag), buf)
		if err != nil {
			return err
		}
		if got != tagSize(tag) || firstDiff(buf[:got], pattern(got, uint64(tag*10+prev))) >= 0 {
			return fmt.Errorf("tag %d: wrong message of %d bytes", tag, got)
		}
	}
	if err := waitAll(ctx, sends); err != nil {
		return err
	}

	// The ordered channel: rank 0 sends rank 1 a tag it does not expect.
	p := c.P2P()
	switch me {
	case 0:
		s, err := p.Isend(1, 0xA, make([]byte, 1<<20))
		if err != nil {
			return err
		}
		var mis *MismatchError
		if _, err := s.Wait(ctx); !errors.As(err, &mis) || mis.Want != 0xB {
			return fmt.Errorf("ordered sender: want a mismatch, got %v", err)
		}
	case 1:
		r, err := p.Irecv(0, 0xB, make([]byte, 1<<20))
		if err != nil {
			return err
		}
		var mis *MismatchError
		if _, err := r.Wait(ctx); !errors.As(err, &mis) || *mis != (MismatchError{Rank: 1, Peer: 0, Want: 0xB, Got: 0xA}) {
			return fmt.Errorf("ordered receiver: want a mismatch, got %v", err)
		}
	}

	// Two pairs by parity, exchanging within.
	sub, err := c.Split(ctx, me%2, me)
	if err != nil {
		return err
	}
	defer sub.Close()
	if sub.Size() != n/2 || sub.Rank() != me/2 {
		return fmt.Errorf("split: rank %d of %d", sub.Rank(), sub.Size())
	}
	other := 1 - sub.Rank()
	buf := make([]byte, 3<<20)
	if err := ringExchange(ctx, sub, 7, pattern(len(buf), uint64(me)), buf); err != nil {
		return fmt.Errorf("split ring: %w", err)
	}
	if firstDiff(buf, pattern(len(buf), uint64(sub.WorldRank(other)))) >= 0 {
		return errors.New("split ring: wrong bytes")
	}
	return nil
}

func tagSize(tag int) int {
	if tag%2 == 0 {
		return 10 * tag
	}
	return eagerMax + 1000*tag
}

// ringExchange sends out to the next rank and receives from the previous one into
// in.
func ringExchange(ctx context.Context, c *Comm, tag uint64, out, in []byte) error {
	n := c.Size()
	s, err := c.Isend((c.Rank()+1)%n, tag, out)
	if err != nil {
		return err
	}
	got, err := c.Recv(ctx, (c.Rank()+n-1)%n, tag, in)
	if err != nil {
		return err
	}
	if got != len(in) {
		return fmt.Errorf("received %d bytes, want %d", got, len(in))
	}
	_, err = s.Wait(ctx)
	return err
}

func waitAll[R Request](ctx context.Context, hs []R) error {
	for _, h := range hs {
		if _, err := h.Wait(ctx); err != nil {
			return err
		}
	}
	return nil
}

// scenarioKill: the last rank is killed while the others wait on it, on
// the user channel, and on the ordered channel for another rank. Both
// waits fail naming the dead rank; the survivors still talk to each other.
func scenarioKill(ctx context.Context, c *Comm, in *bufio.Scanner) error {
	n, me := c.Size(), c.Rank()
	victim := n - 1
	if me == victim {
		fmt.Println("ready")
		<-ctx.Done() // until killed
		return ctx.Err()
	}
	u, err := c.Irecv(victim, 1, make([]byte, 16))
	if err != nil {
		return err
	}
	o, err := c.P2P().Irecv((me+1)%victim, 1, make([]byte, 16))
	if err != nil {
		return err
	}
	fmt.Println("waiting")
	for _, h := range []Request{u, o} {
		_, err := h.Wait(ctx)
		var pe *PeerError
		var dead *bootstrap.RankDeadError
		if !errors.As(err, &pe) || pe.Rank != victim || !errors.As(err, &dead) {
			return fmt.Errorf("want the death of rank %d, got %v", victim, err)
		}
		fmt.Printf("dead %d %d %s\n", pe.Rank, pe.PID, pe.Host)
	}
	var pe *PeerError
	if _, err := c.Isend(victim, 2, nil); !errors.As(err, &pe) || pe.Rank != victim {
		return fmt.Errorf("a send to the dead rank: want its death, got %v", err)
	}
	// No collective of the world can complete any more.
	if _, err := c.Split(ctx, 0, 0); !errors.As(err, &pe) || pe.Rank != victim {
		return fmt.Errorf("a split with a dead rank: want its death, got %v", err)
	}
	// Once every survivor has seen the death, the survivors (which a rank
	// closing would fail as well) still talk to each other.
	if !in.Scan() {
		return errors.New("no go")
	}
	next, prev := (me+1)%victim, (me+victim-1)%victim
	s, err := c.Isend(next, 3, []byte{byte(me)})
	if err != nil {
		return err
	}
	buf := make([]byte, 1)
	if _, err := c.Recv(ctx, prev, 3, buf); err != nil || int(buf[0]) != prev {
		return fmt.Errorf("survivors' ring: %v", err)
	}
	if _, err = s.Wait(ctx); err != nil {
		return err
	}
	// They shrink the world to themselves, and its ordered channel works.
	sub, err := c.Shrink(ctx)
	if err != nil {
		return err
	}
	if sub.Size() != victim || sub.Rank() != me || sub.WorldRank(sub.Rank()) != me {
		return fmt.Errorf("shrunk to rank %d of %d, want %d of %d", sub.Rank(), sub.Size(), me, victim)
	}
	out, got := []byte{byte(me), 0xee}, make([]byte, 2)
	sq, err := sub.P2P().Isend(next, 4, out)
	if err != nil {
		return err
	}
	rq, err := sub.P2P().Irecv(prev, 4, got)
	if err != nil {
		return err
	}
	if err := waitAll(ctx, []Request{rq, sq}); err != nil || got[0] != byte(prev) || got[1] != 0xee {
		return fmt.Errorf("the shrunk ring: %v (got %v)", err, got)
	}
	if _, err := c.P2P().Irecv(prev, 5, got); !errors.As(err, &pe) || pe.Rank != victim {
		return fmt.Errorf("the old world's ordered channel after the shrink: want the death, got %v", err)
	}
	fmt.Printf("shrunk %d\n", sub.Size())
	return sub.Close()
}

// scenarioAbort: one rank aborts while the others wait on it and on each
// other; every waiter fails naming it.
func scenarioAbort(ctx context.Context, c *Comm, in *bufio.Scanner) error {
	n, me := c.Size(), c.Rank()
	const aborter = 2
	if me == aborter {
		fmt.Println("ready")
		if !in.Scan() {
			return errors.New("no go")
		}
		c.Abort(errors.New("checkpoint corrupt"))
		var ae *AbortError
		if _, err := c.Isend(0, 1, nil); !errors.As(err, &ae) || ae.Rank != aborter {
			return fmt.Errorf("after Abort: %v", err)
		}
		return nil
	}
	u, err := c.Irecv(aborter, 1, make([]byte, 16))
	if err != nil {
		return err
	}
	o, err := c.P2P().Irecv((me+1)%n, 1, make([]byte, 16))
	if err != nil {
		return err
	}
	fmt.Println("waiting")
	for _, h := range []Request{u, o} {
		_, err := h.Wait(ctx)
		var ae *AbortError
		if !errors.As(err, &ae) || ae.Rank != aborter || ae.Cause != "checkpoint corrupt" {
			return fmt.Errorf("want the abort of rank %d, got %v", aborter, err)
		}
	}
	fmt.Println("aborted")
	return nil
}
