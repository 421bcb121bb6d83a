package bind

import "github.com/rdmacell/rdmacell/cell"

// Actor is a binding's hands: what it does with each output of a Ready.
// Every method is handed an element of the Ready, valid only until the
// engine's next input; an Actor copies what it keeps. None may feed the
// engine: inputs an output leads to (a failed post, a range to start
// next) are fed after Act returns.
type Actor interface {
	// PostRecv posts a receive chain on its path.
	PostRecv(r *cell.RecvPost)
	// StartReset starts resetting a path in the background, or joins the
	// reset under way (see Path.StartReset).
	StartReset(r *cell.Reset)
	// PostCell posts a cell's chain on its path, with its range's tail
	// written within it, before the WRITE_WITH_IMM, if it has one.
	PostCell(p *cell.Post)
	// WriteToken, WriteGrant, WriteFinal, WriteHold and WriteHoldAck
	// write a record into a slot of the peer's rings, over a path.
	WriteToken(t *cell.TokenWrite)
	WriteGrant(g *cell.GrantWrite)
	WriteFinal(f *cell.FinalWrite)
	WriteHold(h *cell.HoldWrite)
	WriteHoldAck(a *cell.HoldAckWrite)
	// Failed reports the engine's terminal failure (a *cell.NoPathError)
	// in every batch once it has failed, before its events: the binding
	// closes every QP then, so that nothing lands in the failed ranges
	// once they are handed back.
	Failed(err error)
	// Event hands a range back to the application.
	Event(ev *cell.Event)
}

// Act takes e's next batch and acts on it through a, in the order Ready
// documents: receives, resets, cells, tokens, grants, finals, holds, hold
// acks, the terminal failure, events. It returns the batch, for its Deadline and
// for what the binding does once the batch is spent.
func Act(e *cell.Engine, a Actor) *cell.Ready {
	rd := e.Ready()
	each(rd.Recvs, a.PostRecv)
	each(rd.Resets, a.StartReset)
	each(rd.Posts, a.PostCell)
	each(rd.Tokens, a.WriteToken)
	each(rd.Grants, a.WriteGrant)
	each(rd.Finals, a.WriteFinal)
	each(rd.Holds, a.WriteHold)
	each(rd.HoldAcks, a.WriteHoldAck)
	if err := e.Err(); err != nil {
		a.Failed(err)
	}
	each(rd.Events, a.Event)
	return rd
}

func each[T any](s []T, fn func(*T)) {
	for i := range s {
		fn(&s[i])
	}
}
