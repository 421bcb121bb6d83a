package cell

import (
	"fmt"
	"math/bits"
	"time"
)

// Config configures one connection's engine. Paths, MTU, Window,
// MaxRanges, RecvDepth and FirstCellID describe the wire between the two
// ends and must be the same at both; the rest is local. Zero values take
// the defaults documented on each field.
type Config struct {
	// Peer names the remote end in errors (a rank, a host:port).
	Peer string
	// Paths is the number of QPs of the connection, 1 to MaxPaths.
	Paths int
	// MTU is the path MTU in bytes (default 4096). The signalling WQE of a
	// cell carries the cell's last MTU.
	MTU int
	// CellSize fixes the flowcell size in bytes. Zero sizes cells at
	// 1.5 × the measured bandwidth-delay product, within
	// [MinCellSize, MaxCellSize].
	CellSize int64
	// MinCellSize and MaxCellSize bound adaptive cells (defaults 16 KiB and
	// 4 MiB); InitialCellSize is used until a path has been measured
	// (default 256 KiB, clamped to the bounds).
	MinCellSize, MaxCellSize, InitialCellSize int64
	// Window is the most cells in flight on the connection, and the number
	// of slots of the peer's token ring and of the receiver's duplicate
	// filter. A power of two, far below 2^31 (default 1024).
	Window int
	// MaxRanges is the most ranges outstanding per direction, and the
	// number of slots of the grant and final rings. A power of two
	// (default 64).
	MaxRanges int
	// RecvDepth is the number of receive requests the receiver keeps
	// posted on every path, hence the sender's credits per path: the most
	// WRITE_WITH_IMM it may have outstanding there (default 64).
	RecvDepth int
	// FirstCellID is the Global_Cell_ID of the connection's first cell.
	FirstCellID uint32
	// InitialRTT seeds each path's RTT estimate before its first sample
	// (default 500µs): T_soft starts at 3 × InitialRTT.
	InitialRTT time.Duration
	// MinSoftTimeout is the floor of T_soft (default 1ms), so that a quiet
	// path with a tiny variance is not demoted for ordinary jitter.
	MinSoftTimeout time.Duration
	// MaxSoftBackoff bounds the factor T_soft is stretched by for a cell
	// that timed out before (default 64; 1 turns the back-off off). Each
	// time a cell's copy at the head of a path times out, the cell's next
	// copies get twice as long, wherever they are posted: on paths slower
	// than the floor (a NIC shared by many connections, a link held by
	// PFC) a cell is otherwise late on every attempt, for ever.
	MaxSoftBackoff int
	// Policy places new cells on paths (default: a new Adaptive). A policy
	// may keep state, so each engine needs its own.
	Policy Policy
}

// MaxPaths is the most paths a connection may have: path sets are kept
// in 64-bit masks.
const MaxPaths = 64

func (c *Config) setDefaults() {
	if c.MTU == 0 {
		c.MTU = 4096
	}
	if c.MinCellSize == 0 {
		c.MinCellSize = 16 << 10
	}
	if c.MaxCellSize == 0 {
		c.MaxCellSize = 4 << 20
	}
	if c.InitialCellSize == 0 {
		c.InitialCellSize = 256 << 10
	}
	c.InitialCellSize = min(max(c.InitialCellSize, c.MinCellSize), c.MaxCellSize)
	if c.Window == 0 {
		c.Window = 1024
	}
	if c.MaxRanges == 0 {
		c.MaxRanges = 64
	}
	if c.RecvDepth == 0 {
		c.RecvDepth = 64
	}
	if c.InitialRTT == 0 {
		c.InitialRTT = 500 * time.Microsecond
	}
	if c.MinSoftTimeout == 0 {
		c.MinSoftTimeout = time.Millisecond
	}
	if c.MaxSoftBackoff == 0 {
		c.MaxSoftBackoff = 64
	}
	if c.Policy == nil {
		c.Policy = &Adaptive{}
	}
}

// maxSoftBackoff bounds Config.MaxSoftBackoff, far beyond any use, so that
// a stretched T_soft cannot overflow.
const maxSoftBackoff = 1 << 16

// maxCell bounds any cell: a scatter-gather element's length is 32 bits.
const maxCell = 1 << 31

func (c *Config) validate() error {
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("%w: peer %s: %s = %v, want %s", ErrInvalid, c.Peer, field, v, want)
	}
	switch {
	case c.Paths < 1 || c.Paths > MaxPaths:
		return bad("Paths", c.Paths, fmt.Sprintf("1..%d", MaxPaths))
	case c.MTU < 1:
		return bad("MTU", c.MTU, "> 0")
	case c.CellSize < 0 || c.CellSize > maxCell:
		return bad("CellSize", c.CellSize, "0 (adaptive) or 1..2^31")
	case c.MinCellSize < 1 || c.MinCellSize > c.MaxCellSize || c.MaxCellSize > maxCell:
		return bad("MinCellSize..MaxCellSize", fmt.Sprintf("%d..%d", c.MinCellSize, c.MaxCellSize), "1 <= min <= max <= 2^31")
	case c.Window < 2 || c.Window > 1<<20 || bits.OnesCount(uint(c.Window)) != 1:
		return bad("Window", c.Window, "a power of two in 2..2^20")
	case c.MaxRanges < 1 || c.MaxRanges > 1<<16 || bits.OnesCount(uint(c.MaxRanges)) != 1:
		return bad("MaxRanges", c.MaxRanges, "a power of two in 1..65536")
	case c.RecvDepth < 1:
		return bad("RecvDepth", c.RecvDepth, "> 0")
	case c.MaxSoftBackoff < 1 || c.MaxSoftBackoff > maxSoftBackoff:
		return bad("MaxSoftBackoff", c.MaxSoftBackoff, fmt.Sprintf("0 (default) or 1..%d", maxSoftBackoff))
	case c.InitialRTT < 0 || c.MinSoftTimeout < 0:
		return bad("InitialRTT, MinSoftTimeout", fmt.Sprintf("%v, %v", c.InitialRTT, c.MinSoftTimeout), ">= 0")
	}
	return nil
}
