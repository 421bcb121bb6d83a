package comm_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/rdmacell/rdmacell/bootstrap"
	"github.com/rdmacell/rdmacell/comm"
	"github.com/rdmacell/rdmacell/flight"
)

// A program that exports its numbers elsewhere reads Stats: here the
// latency histogram of one operation, recorded as the collectives record
// theirs, and what the rank knows of its peers.
func ExampleComm_Stats() {
	store := bootstrap.NewLocalStore()
	defer store.Close()
	c, err := comm.Init(context.Background(), comm.Options{Rank: 0, WorldSize: 1, Job: "example",
		Store: store, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	h := c.Recorder().Begin(&flight.Op{Name: "AllReduce", DType: "float32", Count: 2, Bytes: 8})
	c.Recorder().End(h, nil)

	s := c.Stats()
	for _, o := range s.Ops {
		fmt.Printf("%s %s: %d done, %d failed\n", o.Op, o.Size, o.Count, o.Failed)
	}
	for _, p := range s.Peers {
		fmt.Printf("rank %d: %s, %d messages sent\n", p.Rank, p.Transport, p.SentMessages)
	}
	// Output:
	// AllReduce le1KiB: 1 done, 0 failed
	// rank 0: self, 0 messages sent
}
