package comm

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/bootstrap"
	"github.com/rdmacell/rdmacell/verbs/ibv"
)

// Ranks of one machine that register different host names behave as
// ranks of different hosts: shared memory inside each name, tcp between.
func TestHostNamesMakeHosts(t *testing.T) {
	hosts := []string{"node-a", "node-a", "node-b"}
	comms := startComms(t, len(hosts), TransportAuto, func(o *Options) { o.Host = hosts[o.Rank] })
	want := [][]string{
		{"self", "shm", "tcp"},
		{"shm", "self", "tcp"},
		{"tcp", "tcp", "self"},
	}
	for r, c := range comms {
		for peer := range comms {
			require.Equal(t, want[r][peer], c.Transport(peer), "rank %d to rank %d", r, peer)
		}
	}
	onEach(t, comms, func(c *Comm) error {
		for peer := range c.Size() {
			if peer == c.Rank() {
				continue
			}
			if err := c.Send(bounded(t), peer, 7, pattern(100, uint64(c.Rank()))); err != nil {
				return err
			}
		}
		for peer := range c.Size() {
			if peer == c.Rank() {
				continue
			}
			got := make([]byte, 100)
			if _, err := c.Recv(bounded(t), peer, 7, got); err != nil {
				return err
			}
			require.Equal(t, pattern(100, uint64(peer)), got)
		}
		return nil
	})

}

// The ibv transport is reachable from comm: in a binary built without the
// ibverbs tag it is an error saying how to build one; on a machine with
// an RDMA port, ranks exchange messages over it.
func TestTransportIBV(t *testing.T) {
	probe, err := ibv.Open(ibv.Options{Logger: quietLogger()})
	switch {
	case errors.Is(err, ibv.ErrNotBuilt):
		// Rank 1 keeps to tcp, so that it waits in Init for rank 0
		// instead of failing first and leaving a world rank 0 cannot
		// complete.
		store := bootstrap.NewLocalStore()
		defer store.Close()
		job := jobID(t)
		errs := make(chan error, 2)
		for r, tr := range []Transport{TransportIBV, TransportTCP} {
			go func() {
				c, err := Init(bounded(t), localOptions(store, job, r, 2, tr))
				if err == nil {
					_ = c.Close()
				}
				errs <- err
			}()
		}
		var oe *OptionError
		got := []error{<-errs, <-errs}
		require.True(t, errors.As(got[0], &oe) || errors.As(got[1], &oe), "%v", got)
		require.Equal(t, "Transport", oe.Field)
		require.ErrorContains(t, oe, "-tags ibverbs")
		return
	case err != nil:
		t.Skipf("ibv: no usable RDMA port here: %v", err)
	}
	require.NoError(t, probe.Close())
	comms := startComms(t, 2, TransportIBV, nil)
	require.Equal(t, string(TransportIBV), comms[0].Transport(1))
	onEach(t, comms, func(c *Comm) error {
		peer := 1 - c.Rank()
		if err := c.Send(bounded(t), peer, 1, pattern(1<<20, uint64(c.Rank()))); err != nil {
			return err
		}
		got := make([]byte, 1<<20)
		_, err := c.Recv(bounded(t), peer, 1, got)
		require.Equal(t, pattern(1<<20, uint64(peer)), got)
		return err
	})
}

// Peers are connected on demand: after Init nothing is connected and the
// store holds no setup keys; a ring exchange connects each rank to its two
// neighbours only, with one setup key and one confirmation key per
// connected pair and direction; a large message dials the bulk
// connection, whose setup crosses the control connection, not the store.
func TestConnectOnDemand(t *testing.T) {
	const world = 8
	store := bootstrap.NewLocalStore()
	defer store.Close()
	job := jobID(t)
	comms := initAll(t, world, func(r int) Options { return localOptions(store, job, r, world, TransportShm) }, nil)
	setupKeys := func() int {
		kvs, _, err := store.List(bounded(t), bootstrap.DefaultKeyPrefix+job+"/p2p/")
		require.NoError(t, err)
		n := 0
		for _, kv := range kvs {
			if strings.Contains(kv.Key, "/comm/ctl") || strings.Contains(kv.Key, "/comm/bulk") {
				n++
			}
		}
		return n
	}
	for _, c := range comms {
		for r, p := range c.w.peers {
			require.False(t, p.connected(), "rank %d connected to rank %d after Init", c.Rank(), r)
		}
	}
	require.Zero(t, setupKeys())

	ring := func(n int) {
		onEach(t, comms, func(c *Comm) error {
			next, prev := (c.Rank()+1)%world, (c.Rank()+world-1)%world
			s, err := c.Isend(next, 1, pattern(n, uint64(c.Rank())))
			if err != nil {
				return err
			}
			got := make([]byte, n)
			if _, err := c.Recv(bounded(t), prev, 1, got); err != nil {
				return err
			}
			require.Equal(t, pattern(n, uint64(prev)), got)
			_, err = s.Wait(bounded(t))
			return err
		})
	}
	bulkLinks := func() (n int) {
		for _, c := range comms {
			for _, p := range c.w.peers {
				p.mu.Lock()
				if p.bulk != nil {
					n++
				}
				p.mu.Unlock()
			}
		}
		return n
	}
	// Small messages need only the control connection.
	ring(8)
	for _, c := range comms {
		next, prev := (c.Rank()+1)%world, (c.Rank()+world-1)%world
		for r, p := range c.w.peers {
			require.Equal(t, r == next || r == prev, p.connected(), "rank %d connected to rank %d", c.Rank(), r)
		}
	}
	require.Equal(t, world*2*2, setupKeys(), "setup and confirmation keys after small messages")
	require.Zero(t, bulkLinks(), "bulk connections after small messages")
	// A large one dials the bulk connection of the pairs that send it.
	ring(1 << 20)
	require.Equal(t, world*2*2, setupKeys(), "setup keys after large messages: the bulk connection's crossed the control one")
	require.Equal(t, world*2, bulkLinks(), "bulk connections after large messages")
}

// unrenewed is a store in which one lease is never renewed, as if its
// owner had died right after granting it.
type unrenewed struct {
	bootstrap.Store
	victim bootstrap.LeaseID
}

func (s *unrenewed) Grant(ctx context.Context, ttl time.Duration) (bootstrap.LeaseID, time.Duration, error) {
	id, got, err := s.Store.Grant(ctx, ttl)
	if s.victim == 0 {
		s.victim = id
	}
	return id, got, err
}

func (s *unrenewed) KeepAlive(ctx context.Context, id bootstrap.LeaseID) (<-chan struct{}, error) {
	if id == s.victim {
		// Never renewed: the owner is dead. Closed, as a store does,
		// when the caller stops asking.
		ch := make(chan struct{})
		context.AfterFunc(ctx, func() { close(ch) })
		return ch, nil
	}
	return s.Store.KeepAlive(ctx, id)
}

// A peer that dies before it answers a connection made on demand is
// reported as dead, by name, once its lease ends: not as a timeout.
func TestConnectToDeadRank(t *testing.T) {
	store := bootstrap.NewLocalStore()
	defer store.Close()
	job := jobID(t)
	victim, err := bootstrap.Join(bounded(t), bootstrap.Config{Store: &unrenewed{Store: store}, Job: job, Rank: 1,
		WorldSize: 2, Host: "elsewhere", LeaseTTL: time.Second, Logger: quietLogger()})
	require.NoError(t, err)
	defer victim.Close(context.Background())
	go func() { _ = victim.Barrier(bounded(t), "comm/setup") }()

	o := localOptions(store, job, 0, 2, TransportTCP)
	o.LeaseTTL = time.Second
	c, err := Init(bounded(t), o)
	require.NoError(t, err)
	defer c.Close()
	err = c.Send(bounded(t), 1, 1, []byte("hello"))
	var dead *bootstrap.RankDeadError
	require.ErrorAs(t, err, &dead, "%v", err)
	require.Equal(t, 1, dead.Rank)
	require.ErrorContains(t, err, "rank 1")
}
