package comm

import (
	"log/slog"

	"github.com/rdmacell/rdmacell/flight"
)

// ordered is a communicator's ordered channel, the P2P of its
// collectives. Its operations are those of Isend and Irecv on a channel of
// their own, where a receive takes the next message whatever its tag and
// a tag that differs is a mismatch (see match.go).
type ordered struct{ c *Comm }

var _ P2P = ordered{}

func (o ordered) Rank() int { return o.c.rank }

func (o ordered) Size() int { return len(o.c.ranks) }

func (o ordered) Isend(peer int, tag uint64, buf []byte) (Request, error) {
	h, err := o.c.post(true, chanOrdered, peer, tag, buf, false)
	if err != nil {
		return nil, err
	}
	return h, nil
}

func (o ordered) Irecv(peer int, tag uint64, buf []byte) (Request, error) {
	h, err := o.c.post(false, chanOrdered, peer, tag, buf, false)
	if err != nil {
		return nil, err
	}
	return h, nil
}

// Comm is the communicator of the channel, for a group that also sends
// messages of its user's, splits or shrinks.
func (o ordered) Comm() *Comm { return o.c }

// Transport tells the collectives which ranks they may share memory with.
func (o ordered) Transport(peer int) string { return o.c.Transport(peer) }

// Host tells the collectives which ranks share a host, for hierarchical
// algorithms.
func (o ordered) Host(peer int) string { return o.c.Host(peer) }

// Err is why the channel can no longer be used (an abort, a dead member,
// Close), or nil. Collectives that wait on memory they share, not in the
// channel, ask it.
func (o ordered) Err() error { return o.c.channelErr(chanOrdered) }

// Logger is the logger of the collectives on this channel.
func (o ordered) Logger() *slog.Logger {
	return o.c.w.base.With("component", "collectives", "rank", o.c.rank)
}

// Recorder is where the collectives record their operations, and ID the
// communicator they record them under.
func (o ordered) Recorder() *flight.Recorder { return o.c.w.rec }

// ID is the communicator's id.
func (o ordered) ID() uint64 { return o.c.id }

func (o ordered) Alloc(n int) ([]byte, error) { return o.c.Alloc(n) }

func (o ordered) Free(b []byte) error { return o.c.Free(b) }
