package driver

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/internal/netchaos"
	"github.com/rdmacell/rdmacell/verbs"
	"github.com/rdmacell/rdmacell/verbs/tcp"
)

// openProxiedEnd opens a tcp device that peers reach through a netchaos
// proxy.
func openProxiedEnd(t *testing.T, name string) (*end, *netchaos.Proxy) {
	t.Helper()
	px, err := netchaos.Listen()
	require.NoError(t, err)
	t.Cleanup(func() { _ = px.Close() })
	d, err := tcp.Open(tcp.Options{Secret: testSecret, Logger: quiet, AdvertiseAddr: px.Addr()})
	require.NoError(t, err)
	px.Forward(d.ListenAddr())
	e := &end{t: t, name: name, dev: d}
	e.pd, err = d.AllocPD()
	require.NoError(t, err)
	return e, px
}

// chaos holds back and resets the paths' and control lanes' TCP
// connections at random until stop is called. A lane is held or cut only
// while lanesUp says every lane is up at both ends, and not within
// laneFaultGap of the last fault on a lane: a lane is repaired over the
// other, and both failing at once would end the channel that coordinates
// the resets, which is not what the test is about.
// laneFaultGap spaces the faults on lanes by more than the provider's
// ack budget (Timeout × (RetryCount+1), 4 s by default): a cut TCP
// connection is dialled again, and a lane whose new connection does not
// come up fails only at the end of that budget.
const laneFaultGap = 5 * time.Second

func chaos(seed uint64, pxs []*netchaos.Proxy, lanes []uint32, lanesUp func() bool) (stop func() (holds, cuts, laneFaults int)) {
	rng := rand.New(rand.NewPCG(seed, 1))
	isLane := func(l *netchaos.Link) bool {
		h := l.Head()
		for _, q := range lanes {
			if bytes.Contains(h, binary.BigEndian.AppendUint32(nil, q)) {
				return true
			}
		}
		return false
	}
	var lastLaneFault time.Time
	done := make(chan struct{})
	var wg sync.WaitGroup
	var holds, cuts, laneFaults int
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Duration(2+rng.IntN(20)) * time.Millisecond):
			}
			var ls []*netchaos.Link
			for _, px := range pxs {
				ls = append(ls, px.Links()...)
			}
			if len(ls) == 0 {
				continue
			}
			l := ls[rng.IntN(len(ls))]
			if isLane(l) {
				if time.Since(lastLaneFault) < laneFaultGap || !lanesUp() {
					continue
				}
				lastLaneFault = time.Now()
				laneFaults++
			}
			if rng.IntN(4) == 0 {
				l.Cut()
				cuts++
			} else {
				l.Hold(rng.IntN(2), time.Duration(1+rng.IntN(150))*time.Millisecond)
				holds++
			}
		}
	})
	return func() (int, int, int) {
		close(done)
		wg.Wait()
		return holds, cuts, laneFaults
	}
}

// Over real TCP connections that a proxy holds back (so that a given-up
// path's data lands after its cells were sent again) and resets in the
// middle of frames, control lanes included, both ends send each other ranges of mixed sizes, and
// every byte of every range is checked. A receive buffer is filled with
// a pattern of its own before it is posted, so a range handed back with
// bytes never written shows the pattern; the sender scribbles over its
// source once a send is done, so a copy read after the hand-back shows
// too.
func TestChaoticNetwork(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds of injected network faults")
	}
	const rounds, slots, n = 200, 8, 4 << 20
	sizes := []int{1, 100, 4096, 9000, 64 << 10, 300 << 10, n, n, n}
	cfg := testConfig()
	cfg.Paths = 8
	cfg.CellSize = 64 << 10
	cfg.Engine.MinSoftTimeout = 20 * time.Millisecond
	a, pxa := openProxiedEnd(t, "A")
	b, pxb := openProxiedEnd(t, "B")
	// The proxies' listeners outlive the connections; their links end
	// with them.
	pr := dialPair(t, runtime.NumGoroutine(), a, b, cfg)
	var lanes []uint32
	for _, e := range []*end{pr.a, pr.b} {
		for _, l := range e.conn.ctl.lanes {
			lanes = append(lanes, l.qpn)
		}
	}
	ends := [2]*end{pr.a, pr.b}
	var src, dst [2]verbs.MR
	for i, e := range ends {
		src[i], dst[i] = e.region(slots*n), e.region(slots*n)
	}
	ctx := bounded(t)
	lanesUp := func() bool {
		return pr.a.conn.Stats().LanesUp == maxLanes && pr.b.conn.Stats().LanesUp == maxLanes
	}
	stop := chaos(1, []*netchaos.Proxy{pxa, pxb}, lanes, lanesUp)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for side := range 2 {
		wg.Go(func() {
			if err := exchange(ctx, ends[side].conn, src[side], dst[side], side, rounds, slots, n, sizes); err != nil {
				errs <- fmt.Errorf("end %s: %w", ends[side].name, err)
			}
		})
	}
	wg.Wait()
	holds, cuts, laneFaults := stop()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, e := range ends {
		st := e.conn.Stats()
		t.Logf("end %s: %d holds and %d cuts (%d on lanes) injected; %d lane repairs; engine %+v", e.name, holds, cuts, laneFaults, st.LaneRepairs, st.Engine)
		require.NoError(t, e.conn.Err(), e.name)
	}
	require.NotZero(t, laneFaults, "the chaos hit control lanes too")
}

// exchange runs one end of TestChaoticNetwork: rounds of one send and
// one receive, each range in its own slot of the regions, with up to
// depth rounds in flight so that ranges overtake each other.
func exchange(ctx context.Context, c *Conn, src, dst verbs.MR, side, rounds, slots, n int, sizes []int) error {
	depth := slots / 2
	type round struct {
		r        int
		sop, rop *Op
	}
	var inflight []round
	finish := func(x round) error {
		r := x.r
		off, size := r%slots*n, sizes[r%len(sizes)]
		s, d := src.Bytes()[off:off+size], dst.Bytes()[off:off+n]
		if _, err := x.sop.Wait(ctx); err != nil {
			return fmt.Errorf("round %d: send: %w", r, err)
		}
		fill(s, 0xBAD) // a copy read from here from now on would be wrong
		got, err := x.rop.Wait(ctx)
		if err != nil {
			return fmt.Errorf("round %d: receive: %w", r, err)
		}
		if got != size {
			return fmt.Errorf("round %d: received %d bytes, want %d", r, got, size)
		}
		want := make([]byte, size)
		fill(want, uint64(r<<1|(1-side)))
		if i := firstDiff(want, d[:size]); i >= 0 {
			return fmt.Errorf("round %d: %s", r, describeDiff(want, d[:size], ^uint64(r<<1|side), i))
		}
		return nil
	}
	for r := range rounds {
		if len(inflight) == depth {
			if err := finish(inflight[0]); err != nil {
				return err
			}
			inflight = inflight[1:]
		}
		off, size := r%slots*n, sizes[r%len(sizes)]
		fill(src.Bytes()[off:off+size], uint64(r<<1|side))
		fill(dst.Bytes()[off:off+n], ^uint64(r<<1|side)) // the receive's own pattern
		rop, err := c.Recv(dst, off, n)
		if err != nil {
			return fmt.Errorf("round %d: post receive: %w", r, err)
		}
		sop, err := c.Send(src, off, size)
		if err != nil {
			return fmt.Errorf("round %d: post send: %w", r, err)
		}
		inflight = append(inflight, round{r, sop, rop})
	}
	for _, x := range inflight {
		if err := finish(x); err != nil {
			return err
		}
	}
	return nil
}

// describeDiff says which cells of a received range are wrong, from the
// first wrong byte at on, and whether their wrong bytes still hold the
// receive's own pattern (never written) or something else.
func describeDiff(want, got []byte, own uint64, at int) string {
	const cell = 64 << 10
	pattern := make([]byte, len(got))
	fill(pattern, own)
	var cells []string
	for c := at / cell; c*cell < len(got) && len(cells) < 8; c++ {
		wrong, unwritten := 0, 0
		for i := c * cell; i < min((c+1)*cell, len(got)); i++ {
			if got[i] != want[i] {
				wrong++
				if got[i] == pattern[i] {
					unwritten++
				}
			}
		}
		if wrong > 0 {
			cells = append(cells, fmt.Sprintf("cell %d: %d bytes wrong, %d of them never written", c, wrong, unwritten))
		}
	}
	return fmt.Sprintf("%d bytes received, first wrong byte %d; %s", len(got), at, strings.Join(cells, "; "))
}
