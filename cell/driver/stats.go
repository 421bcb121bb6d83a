package driver

import (
	"sync/atomic"

	"github.com/rdmacell/rdmacell/cell"
)

// counters are the driver's own, guarded by Conn.mu.
type counters struct {
	cells, completions, tokens uint64
	resetsStarted, resets      uint64
	resetsAgain                uint64
	dead                       uint64
	parks, keepalives, bells   uint64
	laneRepairs                uint64
}

// Stats is a snapshot of a connection.
type Stats struct {
	// Engine holds the engine's counters.
	Engine cell.Stats
	// Paths has one entry per path.
	Paths []PathStats
	// CellsPosted counts cell chains the driver posted; Completions the
	// work completions it fed the engine; TokenPolls the polls of a token
	// ring that found tokens.
	CellsPosted, Completions, TokenPolls uint64
	// ResetsStarted and Resets count path resets begun and completed with
	// the peer, ResetsAgain attempts that failed after both QPs had left
	// their old incarnation (or that the peer overtook) and started over,
	// DeadPaths the paths closed for good.
	ResetsStarted, Resets, ResetsAgain, DeadPaths uint64
	// Parks counts the times the progress goroutine parked with nothing
	// in flight; Parked says it is parked now.
	Parks  uint64
	Parked bool
	// Keepalives counts the rounds of probes sent because ranges were in
	// flight and nothing completed for a while; Bells the finals followed
	// by a bell (see Conn).
	Keepalives, Bells uint64
	// Landings counts the records the provider reported landed in the
	// rings (providers whose regions are verbs.WriteWatchers: tcp).
	Landings uint64
	// InFlight is the number of ranges outstanding, queued included.
	InFlight int
	// Lanes is the number of control lanes, LanesUp of those that send
	// (not failed or being repaired), LaneRepairs the repairs completed.
	Lanes, LanesUp int
	LaneRepairs    uint64
}

// PathStats describes one path.
type PathStats struct {
	cell.PathInfo
	// Gen is the incarnation of the path's QP pair: the number of resets
	// completed or started over.
	Gen uint32
	// Resetting says a reset is under way; Dead that the path is closed
	// for good.
	Resetting, Dead bool
}

// Stats returns a snapshot of the connection's counters and paths.
func (c *Conn) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Stats{
		Engine:        c.eng.Stats(),
		CellsPosted:   c.counters.cells,
		Completions:   c.counters.completions,
		TokenPolls:    c.counters.tokens,
		Landings:      c.landings.Load(),
		ResetsStarted: c.counters.resetsStarted,
		Resets:        c.counters.resets,
		ResetsAgain:   c.counters.resetsAgain,
		DeadPaths:     c.counters.dead,
		Parks:         c.counters.parks,
		Parked:        c.parked,
		Keepalives:    c.counters.keepalives,
		Bells:         c.counters.bells,
		InFlight:      c.ops.live() + len(c.sendQ) + len(c.recvQ),
		Lanes:         len(c.ctl.lanes),
		LanesUp:       c.lanesUpLocked(),
		LaneRepairs:   c.counters.laneRepairs,
		Paths:         make([]PathStats, len(c.paths)),
	}
	for i, p := range c.paths {
		s.Paths[i] = PathStats{PathInfo: c.eng.Path(i), Gen: p.gen, Resetting: p.Resetting(), Dead: p.Dead()}
	}
	return s
}

// Counters are what connections that share them (Config.Counters) did,
// added to atomically: cells and bytes posted by path number, re-posts
// among them, resets begun (a path given up on a soft timeout or a
// failure) and completed.
type Counters struct {
	Cells, Bytes                   [cell.MaxPaths]atomic.Uint64
	Reposts, ResetsStarted, Resets atomic.Uint64
}
