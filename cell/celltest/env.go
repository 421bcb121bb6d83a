package celltest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/rdmacell/rdmacell/cell"
	"github.com/rdmacell/rdmacell/cell/bind"
	"github.com/rdmacell/rdmacell/verbs"
)

// Env runs protocol scenarios written as datadriven scripts, as raft's
// InteractionEnv does: each command acts on a fabric (or on a lone
// engine), and its output is the trace of what the engines did
// meanwhile (see bind.Trace), followed by what the command itself
// reports. A script's golden output is regenerated with
// `go test -rewrite`; a check that fails fails the test whatever the
// golden text says.
//
// Times are Go durations (60ms, 2.5us), sizes bytes with an optional
// KiB or MiB. Ends are A and B; a command that takes end= defaults to A.
//
// A fabric (see Fabric):
//
//	fabric paths=N [window=W] [depth=D] [cell=SIZE] [ranges=R]
//	       [min-soft=T] [rtt=T] [first-id=ID] [backoff=K] [latency=T]
//	       [err-delay=T] [reset-delay=T] [lag=T] [quiet] [ring]
//	       [cq-lag=T] [late-records] [manual-resets]
//	send [from=A|B] len=SIZE [into=SIZE] [recv-first]
//	    a range: the receiver posts its range, the sender its own
//
// Faults, each for the next count messages that match (count=all: every
// one; default 1), from virtual time after= on:
//
//	lose-token [path=P] [cell=ID] [count=N]
//	nack-token [path=P] [cell=ID] [count=N]
//	fail-cell [path=P] [count=N]      a failed completion at the sender
//	cut-cell path=P [after=T] [permanent]
//	    the cell's first request lands, then the path dies silently
//	slow [path=P] [kind=cell|token|grant|final|hold|hold-ack] by=T [count=N]
//	    delays messages; those behind them on the link wait (RC order)
//	kill path=P [permanent] [at=T]   the path drops everything from then
//	hold path=P [from=A|B]    what the end posts on the path waits there,
//	                          in order, neither lost nor failed (a reset
//	                          of the path flushes it)
//	deliver path=P [from=A|B] [count=N]   lets the first N (default all)
//	                          go; the hold ends once none is left
//	fail-resets path=P [n=N]         the next resets fail part way
//
// Time:
//
//	tick T          run the fabric for T
//	run             run until every range has ended at both ends
//	stabilize       run, then 20ms more for late copies to land
//	reset-done path=P   end the reset under way (manual-resets)
//
// A lone engine, fed by hand (its outputs are acted on by nobody):
//
//	engine paths=N [depth=D] [window=W] [cell=SIZE]
//	arrive path=P inc=I recv=K cell=ID [at=T]
//	    a cell arrives on the K-th receive posted into incarnation I of
//	    path P (0: the first chain; each Reset's refill starts the next)
//	path-failed path=P [cause=WORD] [at=T]
//	reset-again path=P [cause=WORD] [at=T]
//	path-quiet, path-reset, path-dead path=P [at=T]
//
// Both:
//
//	stats [end=A|B]   the engine's counters that are not zero
//	paths [end=A|B]   the paths' states
//	ranges            how each range ended at each end
//	cells [end=A]     the cell ids the end posted, and on which paths
//
// Checks, each printing ok or failing the test:
//
//	check clean       no violation; every range ended once at each end,
//	                  intact if delivered
//	check delivered   clean, and every range delivered
//	check failed err=no-path|too-long|remote [tag=N] [side=sent|received]
//	                  the ranges (or range N) failed at both ends (or
//	                  one) so
//	check order       each line of input names a trace line after the
//	                  one the line before named
//	check first-order the first trace line containing each line of
//	                  input comes after the first containing the one
//	                  before
//	check tokens-reordered [end=A]  tokens reached the end out of id order
//	check fresh-refill path=P       the last Reset's refill shares no
//	                  receive id with the path's earlier incarnations
//	check refused     the connection failed: new ranges are refused
//	check cause [end=A] [n=K|all] err=nack|soft-timeout|path-failed [wc]
//	                  the end's K-th Reset (default the first; all:
//	                  every one) names that cause, as a *cell.PathError
//	                  naming the peer, wrapping the work
//	                  completion that failed if wc is given, not if not
//	check post-size max=SIZE   no cell posted was larger
//
// Any command prints the trace of what happened meanwhile, unless it is
// given silent (the trace is still there for the checks).
type Env struct {
	// F is the fabric, once a fabric command made one.
	F *Fabric
	// E is the lone engine, once an engine command made one.
	E     *cell.Engine
	lone  *loneActor
	trace *bind.Trace
	mark  int
	rules []*rule
}

// rule is a fault waiting for the messages it applies to.
type rule struct {
	kind  MsgKind
	path  int // -1: any
	cell  int64
	after int64
	count int // -1: every one
	v     Verdict
	// permanent: the path cut by this rule stays dead.
	permanent bool
}

// NewEnv returns an empty environment.
func NewEnv() *Env { return &Env{} }

// Handle runs one command of a script: a command it cannot run stops
// the test, a check that fails fails it.
func (env *Env) Handle(t *testing.T, d *datadriven.TestData) string {
	t.Helper()
	out, problems, err := env.Run(d)
	if err != nil {
		t.Fatalf("%s: %s: %v", d.Pos, d.Cmd, err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s: %s", d.Pos, d.FullCmd(), p)
	}
	return out
}

// Run runs one command of a script and returns its output, what a
// check found wrong, and why a command could not run.
func (env *Env) Run(d *datadriven.TestData) (out string, problems []string, err error) {
	a := args{d: d}
	if d.Cmd == "fabric" {
		out, err = env.newFabric(&a)
		return out, nil, err
	}
	if d.Cmd == "engine" {
		out, err = env.newEngine(&a)
		return out, nil, err
	}
	if env.trace == nil {
		return "", nil, errors.New("no fabric or engine yet")
	}
	var report string
	switch d.Cmd {
	case "stats":
		report = env.stats(&a)
	case "paths":
		report = env.paths(&a)
	case "ranges":
		report, err = env.ranges()
	case "cells":
		report, err = env.cells(&a)
	case "check":
		report, problems = env.check(&a)
	default:
		if env.F != nil {
			report, err = env.fabricCmd(&a)
		} else {
			report, err = env.engineCmd(&a)
		}
	}
	if err == nil {
		err = a.err
	}
	if err != nil {
		return "", nil, err
	}
	out = env.trace.Since(env.mark)
	env.mark = env.trace.Len()
	if a.flag("silent") {
		out = ""
	}
	return out + report, problems, nil
}

func (env *Env) newFabric(a *args) (string, error) {
	o := DefaultOptions(a.int("paths", 2))
	o.Config.Window = a.int("window", o.Config.Window)
	o.Config.RecvDepth = a.int("depth", o.Config.RecvDepth)
	o.Config.CellSize = a.size("cell", o.Config.CellSize)
	o.Config.MaxRanges = a.int("ranges", o.Config.MaxRanges)
	o.Config.MinSoftTimeout = time.Duration(a.dur("min-soft", int64(o.Config.MinSoftTimeout)))
	o.Config.InitialRTT = time.Duration(a.dur("rtt", int64(o.Config.InitialRTT)))
	o.Config.FirstCellID = uint32(a.int("first-id", 0))
	o.Config.MaxSoftBackoff = a.int("backoff", 0)
	o.Latency = a.dur("latency", o.Latency)
	o.ErrDelay = a.dur("err-delay", o.ErrDelay)
	o.ResetDelay = a.dur("reset-delay", o.ResetDelay)
	o.RecvResetLag = a.dur("lag", 0)
	o.CQLag = a.dur("cq-lag", 0)
	o.Quiet, o.Ring, o.LateRecords, o.ManualResets = a.flag("quiet"), a.flag("ring"), a.flag("late-records"), a.flag("manual-resets")
	if a.err != nil {
		return "", a.err
	}
	f, err := New(o)
	if err != nil {
		return "", err
	}
	env.F, env.E, env.trace, env.mark, env.rules = f, nil, &f.Trace, 0, nil
	f.Hook = env.hook
	out := f.Trace.String()
	env.mark = f.Trace.Len()
	return out, nil
}

func (env *Env) fabricCmd(a *args) (string, error) {
	f := env.F
	switch a.d.Cmd {
	case "send":
		from := a.end("from")
		n := a.size("len", -1)
		if n < 0 {
			return "", errors.New("send: len= missing")
		}
		x := f.TransferInto(from, n, a.size("into", n), a.flag("recv-first"))
		return fmt.Sprintf("tag=%d: %s -> %s, %d bytes\n", x.Tag, x.From.Name, x.To.Name, x.N), nil
	case "lose-token", "nack-token", "fail-cell", "cut-cell", "slow":
		return "", env.addRule(a)
	case "kill":
		q, at, permanent := a.path(), a.dur("at", f.Now), a.flag("permanent")
		if err := env.checkPath(q); err != nil {
			return "", err
		}
		f.At(at, func() { f.Kill(q, permanent) })
		return "", nil
	case "hold":
		q := a.path()
		if err := env.checkPath(q); err != nil {
			return "", err
		}
		f.Hold(a.end("from"), q)
		return "", a.err
	case "deliver":
		q := a.path()
		if err := env.checkPath(q); err != nil {
			return "", err
		}
		n := -1
		if c, ok := a.d.Arg("count"); !ok || len(c.Vals) != 1 || c.Vals[0] != "all" {
			n = a.int("count", -1)
		}
		got := f.Deliver(a.end("from"), q, n)
		return fmt.Sprintf("let go: %d\n", got), a.err
	case "fail-resets":
		q := a.path()
		if err := env.checkPath(q); err != nil {
			return "", err
		}
		f.Ctl[q].FailResets += a.int("n", 1)
		return "", nil
	case "tick":
		if len(a.d.CmdArgs) == 0 || len(a.d.CmdArgs[0].Vals) != 0 {
			return "", errors.New("tick: want a duration")
		}
		d, err := time.ParseDuration(a.d.CmdArgs[0].Key)
		if err != nil {
			return "", err
		}
		f.RunFor(f.Now + int64(d))
		return "", nil
	case "run", "stabilize":
		f.Run(f.Now + 5*time.Second.Nanoseconds())
		if !f.Done() {
			return "", fmt.Errorf("ranges still open at %s", bind.Time(f.Now))
		}
		if a.d.Cmd == "stabilize" {
			f.RunFor(f.Now + 20*Millisecond)
		}
		return "", nil
	case "reset-done":
		q := a.path()
		if !f.ResetDone(q) {
			return "", fmt.Errorf("reset-done: path %d is not being reset", q)
		}
		return "", nil
	}
	return "", fmt.Errorf("unknown command %q", a.d.Cmd)
}

func (env *Env) checkPath(q int) error {
	if q < 0 || q >= env.F.Opts.Paths {
		return fmt.Errorf("path %d, want 0..%d", q, env.F.Opts.Paths-1)
	}
	return nil
}

func (env *Env) addRule(a *args) error {
	r := &rule{path: a.int("path", -1), cell: int64(a.int("cell", -1)), after: a.dur("after", 0), count: 1}
	if c, ok := a.d.Arg("count"); ok && len(c.Vals) == 1 && c.Vals[0] == "all" {
		r.count = -1
	} else {
		r.count = a.int("count", 1)
	}
	switch a.d.Cmd {
	case "lose-token":
		r.kind, r.v = MsgToken, Verdict{Drop: true}
	case "nack-token":
		r.kind, r.v = MsgToken, Verdict{NACK: true}
	case "fail-cell":
		r.kind, r.v = MsgCell, Verdict{Fail: true}
	case "cut-cell":
		r.kind, r.v, r.permanent = MsgCell, Verdict{Partial: true}, a.flag("permanent")
		if r.path < 0 {
			return errors.New("cut-cell: path= missing")
		}
	case "slow":
		kinds := map[string]MsgKind{"cell": MsgCell, "token": MsgToken, "grant": MsgGrant, "final": MsgFinal,
			"hold": MsgHold, "hold-ack": MsgHoldAck}
		k, ok := kinds[a.str("kind", "cell")]
		if !ok {
			return fmt.Errorf("slow: kind %q, want cell, token, grant, final, hold or hold-ack", a.str("kind", ""))
		}
		r.kind, r.v = k, Verdict{Delay: a.dur("by", 0)}
		if r.v.Delay <= 0 {
			return errors.New("slow: by= missing")
		}
	}
	env.rules = append(env.rules, r)
	return a.err
}

// hook applies the first rule that matches m.
func (env *Env) hook(m *Msg) Verdict {
	for _, r := range env.rules {
		if r.count == 0 || r.kind != m.Kind || r.path >= 0 && r.path != m.Path || env.F.Now < r.after {
			continue
		}
		if r.cell >= 0 {
			id := m.Cell
			if m.Kind == MsgToken {
				id = m.Token.ID
			}
			if m.Kind != MsgCell && m.Kind != MsgToken || uint32(r.cell) != id {
				continue
			}
		}
		if r.count > 0 {
			r.count--
		}
		if r.v.Partial {
			env.F.Ctl[m.Path].Permanent = r.permanent
		}
		return r.v
	}
	return Verdict{}
}

// engines returns the engines a command names (end=), with their names.
func (env *Env) engines(a *args) ([]*cell.Engine, []string) {
	if env.F == nil {
		return []*cell.Engine{env.E}, []string{"E"}
	}
	if _, ok := a.d.Arg("end"); !ok {
		return []*cell.Engine{env.F.Ends[0].Engine, env.F.Ends[1].Engine}, []string{"A", "B"}
	}
	en := env.F.Ends[a.end("end")]
	return []*cell.Engine{en.Engine}, []string{en.Name}
}

func (env *Env) stats(a *args) string {
	var b strings.Builder
	es, names := env.engines(a)
	for i, e := range es {
		st := reflect.ValueOf(e.Stats())
		fmt.Fprintf(&b, "%s stats:", names[i])
		for j := range st.NumField() {
			if v := st.Field(j).Uint(); v != 0 {
				fmt.Fprintf(&b, " %s=%d", st.Type().Field(j).Name, v)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

func (env *Env) paths(a *args) string {
	var b strings.Builder
	es, names := env.engines(a)
	for i, e := range es {
		for q := range e.Config().Paths {
			p := e.Path(q)
			fmt.Fprintf(&b, "%s path %d: %s cells=%d posted=%d samples=%d\n", names[i], q, p.State, p.Cells, p.CellsPosted, p.Samples)
		}
	}
	return b.String()
}

// check runs a check and returns its report and what it found wrong,
// which fails the test whatever the golden output says.
func (env *Env) check(a *args) (string, []string) {
	if len(a.d.CmdArgs) == 0 {
		return "", []string{"check what?"}
	}
	what := a.d.CmdArgs[0].Key
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	switch what {
	case "clean", "delivered", "failed":
		env.checkRanges(a, what, fail)
	case "order":
		env.checkOrder(a.d.Input, false, fail)
	case "first-order":
		env.checkOrder(a.d.Input, true, fail)
	case "tokens-reordered":
		if env.F == nil {
			fail("no fabric")
			break
		}
		if arr := env.F.Ends[a.end("end")].TokenArrivals; slices.IsSorted(arr) {
			fail("tokens arrived in id order: the scenario did not reorder them (%v)", arr)
		}
	case "fresh-refill":
		env.checkFreshRefill(a, fail)
	case "cause":
		env.checkCause(a, fail)
	case "post-size":
		if env.F == nil {
			fail("no fabric")
			break
		}
		most := a.size("max", 0)
		for _, en := range env.F.Ends {
			for _, p := range en.Posts {
				if p.N > most {
					fail("%s posted cell %d of %d bytes on path %d, more than %d", en.Name, p.ID, p.N, p.Path, most)
				}
			}
		}
	case "refused":
		es, names := env.engines(a)
		for i, e := range es {
			if err := e.Send(env.now(), cell.SendRange{Len: 1}); !errors.Is(err, cell.ErrNoPath) {
				fail("%s: a new send range: %v, want ErrNoPath", names[i], err)
			}
			if err := e.Recv(env.now(), cell.RecvRange{Len: 1}); !errors.Is(err, cell.ErrNoPath) {
				fail("%s: a new receive range: %v, want ErrNoPath", names[i], err)
			}
		}
	default:
		fail("unknown check %q", what)
	}
	if a.err != nil {
		fail("%v", a.err)
	}
	if len(problems) > 0 {
		return "check " + what + " FAILED:\n" + strings.Join(problems, "\n") + "\n", problems
	}
	return "ok\n", nil
}

func (env *Env) now() int64 {
	if env.F != nil {
		return env.F.Now
	}
	return env.lone.now
}

func (env *Env) checkRanges(a *args, what string, fail func(string, ...any)) {
	f := env.F
	if f == nil {
		fail("no fabric")
		return
	}
	for _, v := range f.Violations {
		fail("violation: %s", v)
	}
	want := map[string]error{"no-path": cell.ErrNoPath, "too-long": cell.ErrTooLong, "remote": cell.ErrRemote}[a.str("err", "")]
	tag := int64(a.int("tag", -1))
	for _, x := range f.Xfers {
		if len(x.Sent) != 1 || len(x.Recv) != 1 {
			fail("tag %d: %d send and %d receive events, want one each", x.Tag, len(x.Sent), len(x.Recv))
			continue
		}
		if x.Corrupt {
			fail("tag %d: corrupt", x.Tag)
		}
		if x.Recv[0].Err == nil && x.Sent[0].Err != nil {
			fail("tag %d: delivered although its sender failed it", x.Tag)
		}
		switch {
		case what == "delivered":
			if x.Sent[0].Err != nil || x.Recv[0].Err != nil || x.Recv[0].Len != x.N {
				fail("tag %d: sent %v, received %d bytes of %d: %v", x.Tag, x.Sent[0].Err, x.Recv[0].Len, x.N, x.Recv[0].Err)
			}
		case what == "failed" && (tag < 0 || uint64(tag) == x.Tag):
			evs := []cell.Event{x.Sent[0], x.Recv[0]}
			switch a.str("side", "") {
			case "sent":
				evs = evs[:1]
			case "received":
				evs = evs[1:]
			}
			checkFailed(x, evs, want, fail)
		}
	}
}

// checkFailed checks that range x failed with want in events evs, with a
// *RangeError naming it and, for ErrNoPath, a *NoPathError naming every
// path.
func checkFailed(x *Xfer, evs []cell.Event, want error, fail func(string, ...any)) {
	for _, ev := range evs {
		if want == nil || !errors.Is(ev.Err, want) {
			fail("tag %d: %v: %v, want %v", x.Tag, ev.Kind, ev.Err, want)
			continue
		}
		var re *cell.RangeError
		if errors.As(ev.Err, &re) && re.Tag != x.Tag {
			fail("tag %d: the error names tag %d", x.Tag, re.Tag)
		}
		if want != cell.ErrNoPath {
			continue
		}
		if re == nil {
			fail("tag %d: %v is not a *cell.RangeError", x.Tag, ev.Err)
		}
		var np *cell.NoPathError
		if !errors.As(ev.Err, &np) {
			fail("tag %d: %v is not a *cell.NoPathError", x.Tag, ev.Err)
			continue
		}
		for q, pe := range np.Paths {
			var p *cell.PathError
			if !errors.As(pe, &p) || p.Path != q {
				fail("tag %d: path %d's cause %v does not name it", x.Tag, q, pe)
			}
		}
	}
}

// checkOrder checks that each line of input names a trace line after
// the one the line before named (first: the first trace line containing
// each comes no earlier than the first containing the one before).
func (env *Env) checkOrder(input string, first bool, fail func(string, ...any)) {
	lines := env.trace.Lines()
	from, prev := 0, ""
	for _, pat := range strings.Split(strings.TrimSpace(input), "\n") {
		pat = strings.TrimSpace(pat)
		start := from
		if first {
			start = 0
		}
		i := slices.IndexFunc(lines[start:], func(l string) bool { return strings.Contains(l, pat) })
		switch {
		case i < 0 && prev == "":
			fail("no trace line contains %q", pat)
			return
		case i < 0:
			fail("no trace line after %q contains %q", prev, pat)
			return
		case start+i < from:
			fail("the first line containing %q comes before the first containing %q", pat, prev)
			return
		}
		from, prev = start+i, pat
	}
}

// ranges reports how each range ended at each end.
func (env *Env) ranges() (string, error) {
	if env.F == nil {
		return "", errors.New("no fabric")
	}
	var b strings.Builder
	for _, x := range env.F.Xfers {
		fmt.Fprintf(&b, "tag=%d %s -> %s, %d bytes:\n", x.Tag, x.From.Name, x.To.Name, x.N)
		for _, evs := range [][]cell.Event{x.Sent, x.Recv} {
			for _, ev := range evs {
				fmt.Fprintf(&b, "  %s\n", bind.Event(ev))
			}
		}
	}
	return b.String(), nil
}

// cells reports the cell ids an end posted: how many, in runs of
// consecutive ids (serial, so a wrap shows), and how many posts.
func (env *Env) cells(a *args) (string, error) {
	if env.F == nil {
		return "", errors.New("no fabric")
	}
	en := env.F.Ends[a.end("end")]
	ids := en.PostedIDs()
	var runs []string
	for i := 0; i < len(ids); {
		j := i
		for j+1 < len(ids) && ids[j+1] == ids[j]+1 {
			j++
		}
		if j == i {
			runs = append(runs, fmt.Sprint(ids[i]))
		} else {
			runs = append(runs, fmt.Sprintf("%d..%d", ids[i], ids[j]))
		}
		i = j + 1
	}
	return fmt.Sprintf("%s posted %d cells in %d posts: %s; per path %v\n", en.Name, len(ids), len(en.Posts), strings.Join(runs, " "), en.CellsOn()), nil
}

// args reads a command's arguments, remembering the first error.
type args struct {
	d   *datadriven.TestData
	err error
}

func (a *args) str(key, def string) string {
	arg, ok := a.d.Arg(key)
	if !ok {
		return def
	}
	if len(arg.Vals) != 1 {
		a.fail(fmt.Errorf("%s: want one value", key))
		return def
	}
	return arg.Vals[0]
}

func (a *args) flag(key string) bool { _, ok := a.d.Arg(key); return ok }

func (a *args) int(key string, def int) int {
	s := a.str(key, "")
	if s == "" {
		return def
	}
	n, err := strconv.ParseInt(s, 0, 64)
	if err != nil {
		a.fail(fmt.Errorf("%s: %w", key, err))
		return def
	}
	return int(n)
}

func (a *args) path() int {
	if _, ok := a.d.Arg("path"); !ok {
		a.fail(errors.New("path= missing"))
	}
	return a.int("path", 0)
}

func (a *args) size(key string, def int64) int64 {
	s := a.str(key, "")
	if s == "" {
		return def
	}
	mul := int64(1)
	for suf, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20} {
		if t, ok := strings.CutSuffix(s, suf); ok {
			s, mul = t, m
		}
	}
	n, err := strconv.ParseInt(s, 0, 64)
	if err != nil {
		a.fail(fmt.Errorf("%s: %w", key, err))
		return def
	}
	return n * mul
}

func (a *args) dur(key string, def int64) int64 {
	s := a.str(key, "")
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		a.fail(fmt.Errorf("%s: %w", key, err))
		return def
	}
	return int64(d)
}

func (a *args) end(key string) int {
	switch s := a.str(key, "A"); s {
	case "A":
		return 0
	case "B":
		return 1
	default:
		a.fail(fmt.Errorf("%s: end %q, want A or B", key, s))
		return 0
	}
}

func (a *args) fail(err error) {
	if a.err == nil {
		a.err = err
	}
}

// loneActor records what a lone engine asks for: the receive ids of
// each incarnation of each path, as a driver would post them.
type loneActor struct {
	now    int64
	incarn [][][]uint64
}

func (l *loneActor) PostRecv(r *cell.RecvPost) {
	inc := l.incarn[r.Path]
	inc[len(inc)-1] = append(inc[len(inc)-1], recvIDs(r.WR)...)
}

func (l *loneActor) StartReset(r *cell.Reset) {
	l.incarn[r.Path] = append(l.incarn[r.Path], recvIDs(r.Refill))
}

func (l *loneActor) PostCell(*cell.Post)             {}
func (l *loneActor) WriteToken(*cell.TokenWrite)     {}
func (l *loneActor) WriteGrant(*cell.GrantWrite)     {}
func (l *loneActor) WriteFinal(*cell.FinalWrite)     {}
func (l *loneActor) WriteHold(*cell.HoldWrite)       {}
func (l *loneActor) WriteHoldAck(*cell.HoldAckWrite) {}
func (l *loneActor) Failed(error)                    {}
func (l *loneActor) Event(*cell.Event)               {}

func (env *Env) newEngine(a *args) (string, error) {
	cfg := cell.Config{Peer: "P", Paths: a.int("paths", 2), MTU: 4096, CellSize: a.size("cell", 16<<10),
		RecvDepth: a.int("depth", 4), Window: a.int("window", 0)}
	if a.err != nil {
		return "", a.err
	}
	e, err := cell.New(cfg)
	if err != nil {
		return "", err
	}
	env.F, env.E, env.trace, env.mark, env.rules = nil, e, &bind.Trace{}, 0, nil
	env.lone = &loneActor{incarn: make([][][]uint64, cfg.Paths)}
	for q := range env.lone.incarn {
		env.lone.incarn[q] = [][]uint64{nil}
	}
	env.act()
	out := env.trace.String()
	env.mark = env.trace.Len()
	return out, nil
}

// act takes the lone engine's batch, notes it and records its receives.
func (env *Env) act() {
	rd := bind.Act(env.E, env.lone)
	env.trace.Ready(env.lone.now, "E", rd)
}

func (env *Env) engineCmd(a *args) (string, error) {
	e, l := env.E, env.lone
	l.now = a.dur("at", l.now)
	q := a.path()
	if a.err != nil {
		return "", a.err
	}
	cause := errors.New(a.str("cause", "by the script"))
	var err error
	switch a.d.Cmd {
	case "arrive":
		inc, k, id := a.int("inc", 0), a.int("recv", 0), uint32(a.int("cell", 0))
		if q < 0 || q >= len(l.incarn) || inc < 0 || inc >= len(l.incarn[q]) || k < 0 || k >= len(l.incarn[q][inc]) {
			return "", fmt.Errorf("arrive: no receive %d in incarnation %d of path %d", k, inc, q)
		}
		env.trace.Input(l.now, "E", "arrive path=%d cell=%d (receive %d of incarnation %d)", q, id, k, inc)
		err = e.Completion(l.now, q, verbs.WC{ID: l.incarn[q][inc][k], Status: verbs.StatusSuccess,
			Opcode: verbs.OpRecvWriteImm, Flags: verbs.WCWithImm, Imm: id, ByteLen: 4096})
	case "path-failed":
		env.trace.Input(l.now, "E", "path-failed path=%d: %v", q, cause)
		err = e.PathFailed(l.now, q, cause)
	case "reset-again":
		env.trace.Input(l.now, "E", "reset-again path=%d: %v", q, cause)
		err = e.ResetAgain(l.now, q, cause)
	case "path-quiet":
		env.trace.Input(l.now, "E", "quiet path=%d", q)
		err = e.PathQuiet(l.now, q)
	case "path-reset":
		env.trace.Input(l.now, "E", "reset-done path=%d", q)
		err = e.PathReset(l.now, q)
	case "path-dead":
		env.trace.Input(l.now, "E", "dead path=%d: %v", q, cause)
		err = e.PathDead(l.now, q, cause)
	default:
		return "", fmt.Errorf("unknown command %q", a.d.Cmd)
	}
	if err != nil {
		// Refused before the engine took it: there is no new batch.
		return fmt.Sprintf("error: %v\n", err), nil
	}
	env.act()
	return "", nil
}

func (env *Env) checkFreshRefill(a *args, fail func(string, ...any)) {
	q := a.path()
	var inc [][][]uint64
	if env.F != nil {
		if a.err != nil || env.checkPath(q) != nil {
			fail("path %d", q)
			return
		}
		inc = env.F.Ends[a.end("end")].incarn
	} else {
		inc = env.lone.incarn
		if q < 0 || q >= len(inc) {
			fail("path %d", q)
			return
		}
	}
	incs := inc[q]
	if len(incs) < 2 {
		fail("path %d was never reset", q)
		return
	}
	last := incs[len(incs)-1]
	if len(last) == 0 {
		fail("the last refill of path %d is empty", q)
	}
	for i, old := range incs[:len(incs)-1] {
		for _, id := range last {
			if slices.Contains(old, id) {
				fail("receive id %#x of the last refill was posted in incarnation %d too", id, i)
			}
		}
	}
}

func (env *Env) checkCause(a *args, fail func(string, ...any)) {
	if env.F == nil {
		fail("no fabric")
		return
	}
	en := env.F.Ends[a.end("end")]
	want := map[string]error{"nack": cell.ErrNACK, "soft-timeout": cell.ErrSoftTimeout, "no-progress": cell.ErrNoProgress, "path-failed": cell.ErrPathFailed}[a.str("err", "")]
	if want == nil {
		fail("err=%q, want nack, soft-timeout or path-failed", a.str("err", ""))
		return
	}
	causes := en.ResetCauses
	if a.str("n", "") != "all" {
		k := a.int("n", 0)
		if k < 0 || k >= len(causes) {
			fail("%s asked for %d resets, not %d", en.Name, len(causes), k+1)
			return
		}
		causes = causes[k : k+1]
	}
	for _, c := range causes {
		if !errors.Is(c, want) {
			fail("cause %v is not %v", c, want)
		}
		var pe *cell.PathError
		if !errors.As(c, &pe) || pe.Peer != en.peer().Name {
			fail("cause %v is not a *cell.PathError naming peer %s", c, en.peer().Name)
		}
		var wce *verbs.WCError
		if errors.As(c, &wce) != a.flag("wc") {
			fail("cause %v: wraps a failed work completion: %v, want %v", c, !a.flag("wc"), a.flag("wc"))
		}
	}
}
