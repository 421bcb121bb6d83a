package tcp

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Warnings are rate-limited per source: a peer that keeps failing, or a
// host that keeps sending strangers to the listener, must not fill a
// terminal or a --log-dir disk. The first warning of a source is logged;
// the ones that follow within warnInterval are counted, and the count is
// logged once at the end of the interval, which then starts again for as
// long as the source keeps warning. A source thus logs at most one warning
// and one count per interval, and the device's Close logs the counts still
// pending, so that nothing is lost silently.
const (
	warnInterval = 10 * time.Second
	// maxWarnSources bounds the sources tracked at once; beyond it, every
	// new source shares one entry, so that a flood from many addresses
	// cannot grow the map (or the log) without bound.
	maxWarnSources = 1024
	overflowSource = "other sources"
)

// warnLimiter is a device's rate limiter of warnings.
type warnLimiter struct {
	log      *slog.Logger
	interval time.Duration

	mu      sync.Mutex
	sources map[string]*warnSource
	closed  bool
}

// warnSource is one source's current interval.
type warnSource struct {
	msg        string // the message of its last suppressed warning
	suppressed int
	timer      *time.Timer // ends the interval
}

func newWarnLimiter(log *slog.Logger, interval time.Duration) *warnLimiter {
	return &warnLimiter{log: log, interval: interval, sources: make(map[string]*warnSource)}
}

// warn logs msg with args at warning level for source, unless source has
// already warned in the current interval, in which case it is counted.
func (w *warnLimiter) warn(source, msg string, args ...any) {
	w.logAt(slog.LevelWarn, source, msg, args...)
}

// logAt is warn at another level (errors share their source's budget).
func (w *warnLimiter) logAt(level slog.Level, source, msg string, args ...any) {
	w.mu.Lock()
	s := w.sources[source]
	if s == nil && len(w.sources) >= maxWarnSources {
		source = overflowSource
		s = w.sources[source]
	}
	if s != nil {
		s.suppressed++
		s.msg = msg
		w.mu.Unlock()
		return
	}
	s = &warnSource{}
	w.sources[source] = s
	if !w.closed {
		s.timer = time.AfterFunc(w.interval, func() { w.endInterval(source) })
	}
	w.mu.Unlock()
	w.log.Log(context.Background(), level, msg, args...)
}

// endInterval logs the count of source's suppressed warnings, if any, and
// starts a new interval; a source that stayed quiet is forgotten.
func (w *warnLimiter) endInterval(source string) {
	w.mu.Lock()
	s := w.sources[source]
	if s == nil || w.closed {
		w.mu.Unlock()
		return
	}
	n, msg := s.suppressed, s.msg
	if n == 0 {
		delete(w.sources, source)
		w.mu.Unlock()
		return
	}
	s.suppressed = 0
	s.timer = time.AfterFunc(w.interval, func() { w.endInterval(source) })
	w.mu.Unlock()
	w.logSuppressed(source, msg, n)
}

// close stops the intervals and logs every count still pending.
func (w *warnLimiter) close() {
	w.mu.Lock()
	w.closed = true
	pending := make(map[string]warnSource, len(w.sources))
	for name, s := range w.sources {
		if s.timer != nil {
			s.timer.Stop()
		}
		if s.suppressed > 0 {
			pending[name] = *s
		}
	}
	clear(w.sources)
	w.mu.Unlock()
	for name, s := range pending {
		w.logSuppressed(name, s.msg, s.suppressed)
	}
}

func (w *warnLimiter) logSuppressed(source, msg string, n int) {
	w.log.LogAttrs(context.Background(), slog.LevelWarn, "tcp: more warnings suppressed",
		slog.String("source", source), slog.Int("count", n), slog.String("last", msg),
		slog.Duration("interval", w.interval))
}

// hostOf is the host part of a host:port address: the source of a
// stranger's connections, whose ports change with every attempt.
func hostOf(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}
