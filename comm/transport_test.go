package comm

import (
	"errors"
	"testing"

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
		store := bootstrap.NewLocalStore()
		defer store.Close()
		job := jobID(t)
		errs := make(chan error, 2)
		for r := range 2 {
			go func() {
				_, err := Init(bounded(t), localOptions(store, job, r, 2, TransportIBV))
				errs <- err
			}()
		}
		for range 2 {
			err := <-errs
			var oe *OptionError
			require.ErrorAs(t, err, &oe)
			require.Equal(t, "Transport", oe.Field)
			require.ErrorContains(t, err, "-tags ibverbs")
		}
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
