package bind

import "github.com/rdmacell/rdmacell/cell"

// Path is a binding's state of one path of a connection: whether its QP
// pair is being reset or is closed for good, and the reader of its token
// ring. It keeps the contract of package cell about a path's
// incarnations, the same for every binding:
//
//   - a Reset the engine asks for starts a reset of the QP pair with the
//     peer, unless one is under way (the peer asked first, or the
//     engine asks again as the path fails once more): it joins that one
//     (StartReset);
//   - once both QPs have been through ERR, nothing of the old incarnation
//     can land any more: the binding feeds every completion of it still
//     in its CQ, then Quiet reads the token ring a last time, clears it
//     and tells the engine (Engine.PathQuiet), which lets the ranges the
//     path held finish over the others while the reset goes on;
//   - once both ends are in RTS, EndReset does the same last read and
//     clear, and the binding reports Engine.PathReset (Back does both),
//     or, for a reset that failed part way, Engine.ResetAgain, whose new
//     Reset starts over (StartReset again);
//   - a path that cannot come back is closed at both ends and reported
//     with Kill (Engine.PathDead); a dead path is never reset.
//
// The mechanics of a reset (who talks to the peer, how long it takes) are
// each binding's own. A binding that resets a QP pair as one, as a
// simulator does, may keep one Path for both ends; without a token ring
// (Tokens never initialised) a Path reads nothing of the engine, and
// EndReset takes a nil one.
type Path struct {
	// Tokens is the path's section of this end's token ring, for a
	// binding that has one (a simulator that moves tokens as messages
	// has none).
	Tokens    TokenRing
	resetting bool
	dead      bool
	resets    uint64
}

// StartReset reports whether a Reset starts a reset of the path: false
// if one is under way, which the Reset joins, or the path is dead.
func (p *Path) StartReset() bool {
	if p.resetting || p.dead {
		return false
	}
	p.resetting = true
	p.resets++
	return true
}

// Resetting reports whether a reset is under way.
func (p *Path) Resetting() bool { return p.resetting }

// Dead reports whether the path is closed for good.
func (p *Path) Dead() bool { return p.dead }

// Resets counts the resets started.
func (p *Path) Resets() uint64 { return p.resets }

// Quiet tells e that path q's old incarnation is gone at both ends,
// after a last read of its token ring, which it leaves clear for the
// next. The binding has fed every completion of the old incarnation
// first. A path not being reset is left alone. It reports whether the
// last read found tokens.
func (p *Path) Quiet(now int64, e *cell.Engine, q int) bool {
	if !p.resetting {
		return false
	}
	found := p.lastRead(now, e, q)
	_ = e.PathQuiet(now, q)
	return found
}

// EndReset ends the reset under way after a last read of the token ring,
// which it leaves clear for the next incarnation. The binding reports
// next what came of the reset: Engine.PathReset (see Back),
// Engine.ResetAgain, or Kill. It reports whether the last read found
// tokens.
func (p *Path) EndReset(now int64, e *cell.Engine, q int) bool {
	p.resetting = false
	return p.lastRead(now, e, q)
}

// Back ends the reset under way and tells e that path q is back.
func (p *Path) Back(now int64, e *cell.Engine, q int) {
	p.EndReset(now, e, q)
	_ = e.PathReset(now, q)
}

// Kill tells e that path q is closed for good, and why. Its token ring
// is not read again.
func (p *Path) Kill(now int64, e *cell.Engine, q int, cause error) {
	p.resetting, p.dead = false, true
	p.Tokens.Forget()
	_ = e.PathDead(now, q, cause)
}

func (p *Path) lastRead(now int64, e *cell.Engine, q int) bool {
	found := p.Tokens.slots != nil && p.Tokens.Poll(now, e, q)
	p.Tokens.Forget()
	return found
}
