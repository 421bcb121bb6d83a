package comm

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
)

// Debug output is per component: every logger of the runtime carries a
// "component" attribute (comm, bootstrap, cell, tcp), and RDMACELL_DEBUG
// or Options.Debug picks the components whose debug records are shown.

const debugWant = `"1" or "all", "0", or a comma-separated list of components such as comm,cell,bootstrap`

var debugPattern = regexp.MustCompile(`^[a-z0-9_]+(,[a-z0-9_]+)*$`)

// debugSet is the set of components with debug output on.
type debugSet struct {
	all   bool
	names map[string]bool
}

func (d debugSet) any() bool { return d.all || len(d.names) > 0 }

func (d debugSet) has(component string) bool { return d.all || d.names[component] }

// parseDebug parses a debug setting. Names it does not know are accepted:
// the same setting also reaches the launcher and the programs' own code.
func parseDebug(s string) (debugSet, error) {
	switch s {
	case "", "0", "false":
		return debugSet{}, nil
	case "1", "all", "true":
		return debugSet{all: true}, nil
	}
	if !debugPattern.MatchString(s) {
		return debugSet{}, fmt.Errorf("%w: debug setting %q", ErrInvalidArgument, s)
	}
	d := debugSet{names: make(map[string]bool)}
	for _, n := range strings.Split(s, ",") {
		d.names[n] = true
	}
	return d, nil
}

// newLogger returns the logger of a communicator: base, with debug records
// let through for the components in setting.
func newLogger(base *slog.Logger, setting string) *slog.Logger {
	d, _ := parseDebug(setting) // validated by Options.resolve
	if !d.any() {
		if base == nil {
			base = slog.Default()
		}
		return base
	}
	var inner slog.Handler
	if base != nil {
		inner = base.Handler()
	} else {
		inner = slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})
	}
	return slog.New(&debugHandler{inner: inner, set: d})
}

// debugHandler drops debug records of components not selected.
type debugHandler struct {
	inner     slog.Handler
	set       debugSet
	component string // from WithAttrs, "" if none yet
}

func (h *debugHandler) Enabled(ctx context.Context, l slog.Level) bool {
	if l < slog.LevelInfo && h.component != "" && !h.set.has(h.component) {
		return false
	}
	return h.inner.Enabled(ctx, l)
}

func (h *debugHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelInfo && h.component == "" {
		comp := ""
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "component" {
				comp = a.Value.String()
				return false
			}
			return true
		})
		if !h.set.has(comp) {
			return nil
		}
	}
	return h.inner.Handle(ctx, r)
}

func (h *debugHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	for _, a := range attrs {
		if a.Key == "component" {
			c.component = a.Value.String()
		}
	}
	c.inner = h.inner.WithAttrs(attrs)
	return &c
}

func (h *debugHandler) WithGroup(name string) slog.Handler {
	c := *h
	c.inner = h.inner.WithGroup(name)
	return &c
}

// logger returns the logger of a component below the communicator: the
// cell connections, a provider; "" for one that names itself (the
// bootstrap).
func (w *world) logger(component string) *slog.Logger {
	l := w.base
	if component != "" {
		l = l.With("component", component, "job", w.opts.Job, "rank", w.opts.Rank)
	}
	return slog.New(&closingFilter{inner: l.Handler(), quiet: &w.quiet})
}

// closingFilter drops warnings once its world is closing.
type closingFilter struct {
	inner slog.Handler
	quiet *atomic.Bool
}

func (h *closingFilter) Enabled(ctx context.Context, l slog.Level) bool {
	if h.quiet.Load() && l >= slog.LevelWarn && l < slog.LevelError {
		return false
	}
	return h.inner.Enabled(ctx, l)
}

func (h *closingFilter) Handle(ctx context.Context, r slog.Record) error {
	if h.quiet.Load() && r.Level >= slog.LevelWarn && r.Level < slog.LevelError {
		return nil
	}
	return h.inner.Handle(ctx, r)
}

func (h *closingFilter) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &closingFilter{inner: h.inner.WithAttrs(attrs), quiet: h.quiet}
}

func (h *closingFilter) WithGroup(name string) slog.Handler {
	return &closingFilter{inner: h.inner.WithGroup(name), quiet: h.quiet}
}
