package bind

import (
	"fmt"
	"strings"
	"time"

	"github.com/rdmacell/rdmacell/cell"
)

// Trace is a readable history of a connection: one line per input an
// engine took and per output it produced, each with its time and end,
// inputs marked "<-" and outputs "->":
//
//	2.016µs A <- grant seq=0 len=10240
//	2.016µs A -> post path=0 cell=0 len=10240
//	 12.2µs B -> token path=0 slot=0 cell=0 ok
//
// A binding that simulates both ends (a test fabric, a simulator) keeps
// one for the two; a failing scenario or seed prints it. A Trace's zero
// value is ready to use. It is for tests and debugging, not hot paths:
// every line allocates.
type Trace struct {
	lines []string
	// deadline is the last deadline printed per end.
	deadline map[string]int64
}

// Input notes an input to end's engine.
func (t *Trace) Input(now int64, end, format string, args ...any) {
	t.add(now, end, "<- "+fmt.Sprintf(format, args...))
}

// Note notes something the binding saw or did that is not an engine
// input or output (a message lost on a link, a reset confirmed).
func (t *Trace) Note(now int64, end, format string, args ...any) {
	t.add(now, end, "-- "+fmt.Sprintf(format, args...))
}

// Ready notes the outputs of a batch of end's engine, and its deadline
// when it changed.
func (t *Trace) Ready(now int64, end string, rd *cell.Ready) {
	EachOutput(rd, func(line string) { t.add(now, end, "-> "+line) })
	if t.deadline == nil {
		t.deadline = map[string]int64{}
	}
	if d, ok := t.deadline[end]; rd.Deadline != d || !ok && rd.Deadline != 0 {
		t.deadline[end] = rd.Deadline
		t.add(now, end, "-> "+deadline(rd.Deadline))
	}
}

func (t *Trace) add(now int64, end, s string) {
	t.lines = append(t.lines, fmt.Sprintf("%s %s %s", Time(now), end, s))
}

// Len returns how many lines the trace holds.
func (t *Trace) Len() int { return len(t.lines) }

// Since returns the lines from the n-th on, one a line.
func (t *Trace) Since(n int) string {
	if n >= len(t.lines) {
		return ""
	}
	return strings.Join(t.lines[n:], "\n") + "\n"
}

// String returns the whole trace.
func (t *Trace) String() string { return t.Since(0) }

// Lines returns the lines of the trace; the slice is the trace's own.
func (t *Trace) Lines() []string { return t.lines }

// Time formats a virtual or monotonic time in nanoseconds as a trace
// prints it.
func Time(ns int64) string { return time.Duration(ns).String() }

func deadline(d int64) string {
	if d == 0 {
		return "no deadline"
	}
	return "deadline " + Time(d)
}

// FormatReady returns a batch's outputs, sep between two, and its
// deadline: what a driver logs at debug level.
func FormatReady(rd *cell.Ready, sep string) string {
	var b strings.Builder
	EachOutput(rd, func(line string) {
		b.WriteString(line)
		b.WriteString(sep)
	})
	b.WriteString(deadline(rd.Deadline))
	return b.String()
}

// EachOutput calls fn with a line for every output of a batch, in the
// order a binding acts on them (see Act).
func EachOutput(rd *cell.Ready, fn func(line string)) {
	for _, r := range rd.Recvs {
		fn(fmt.Sprintf("recv path=%d n=%d", r.Path, r.Count))
	}
	for _, r := range rd.Resets {
		n := 0
		for wr := r.Refill; wr != nil; wr = wr.Next {
			n++
		}
		fn(fmt.Sprintf("reset path=%d refill=%d: %v", r.Path, n, r.Cause))
	}
	for _, p := range rd.Posts {
		var n uint32
		wrs := 0
		for wr := p.WR; wr != nil; wr = wr.Next {
			wrs++
			for _, sg := range wr.SGL {
				n += sg.Length
			}
		}
		if p.Tail != nil {
			fn(fmt.Sprintf("post path=%d cell=%d len=%d wrs=%d tail %s", p.Path, p.Cell, n, wrs, Tail(*p.Tail)))
			continue
		}
		fn(fmt.Sprintf("post path=%d cell=%d len=%d wrs=%d", p.Path, p.Cell, n, wrs))
	}
	for _, t := range rd.Tokens {
		fn(fmt.Sprintf("token path=%d slot=%d %s", t.Path, t.Slot, Token(t.Token)))
	}
	for _, g := range rd.Grants {
		fn(fmt.Sprintf("grant path=%d slot=%d %s", g.Path, g.Slot, Grant(g.Grant)))
	}
	for _, f := range rd.Finals {
		fn(fmt.Sprintf("final path=%d slot=%d %s", f.Path, f.Slot, Final(f.Final)))
	}
	for _, h := range rd.Holds {
		fn(fmt.Sprintf("hold path=%d slot=%d seq=%d", h.Path, h.Slot, h.Hold.Seq))
	}
	for _, a := range rd.HoldAcks {
		fn(fmt.Sprintf("hold-ack path=%d slot=%d %s", a.Path, a.Slot, HoldAck(a.Ack)))
	}
	for _, ev := range rd.Events {
		fn(Event(ev))
	}
}

// Tail formats a tail.
func Tail(t cell.Tail) string {
	return fmt.Sprintf("seq=%d len=%d cells=%d..%d", t.Seq, t.Len, t.First, t.First+t.Cells-1)
}

// HoldAck formats a hold ack.
func HoldAck(a cell.HoldAck) string {
	if a.Done {
		return fmt.Sprintf("seq=%d done", a.Seq)
	}
	return fmt.Sprintf("seq=%d held", a.Seq)
}

// Token formats a token.
func Token(t cell.Token) string { return fmt.Sprintf("cell=%d %v", t.ID, t.Status) }

// Grant formats a grant.
func Grant(g cell.Grant) string { return fmt.Sprintf("seq=%d len=%d", g.Seq, g.Len) }

// Final formats a final.
func Final(f cell.Final) string {
	st := fmt.Sprint(int(f.Status))
	switch f.Status {
	case cell.FinalOK:
		st = "ok"
	case cell.FinalTooLong:
		st = "too-long"
	}
	return fmt.Sprintf("seq=%d len=%d %s", f.Seq, f.Len, st)
}

// Event formats a range's event.
func Event(ev cell.Event) string {
	if ev.Err != nil {
		return fmt.Sprintf("%v tag=%d failed: %v", ev.Kind, ev.Tag, ev.Err)
	}
	return fmt.Sprintf("%v tag=%d len=%d", ev.Kind, ev.Tag, ev.Len)
}
