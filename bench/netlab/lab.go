package netlab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"
)

// Lab is a fabric in network namespaces. Its methods are safe for
// concurrent use; after Down they return ErrDown.
type Lab struct {
	cfg Config

	mu   sync.Mutex
	down bool
	// rates holds the current rate of each spine link, indexed by
	// SpineLink.index, so that a fault can be undone.
	rates []Rate
}

// SpineLink names the link between spine Spine and leaf Leaf.
type SpineLink struct {
	Spine, Leaf int
}

func (l SpineLink) String() string { return fmt.Sprintf("s%d-leaf%d", l.Spine, l.Leaf) }

// Up builds the lab cfg describes. Leftovers of an earlier lab with the
// same name are removed first; if building fails, whatever was built is
// removed again. The lab stays until Down, also when ctx ends later.
func Up(ctx context.Context, cfg Config) (*Lab, error) {
	if err := cfg.resolve(); err != nil {
		return nil, err
	}
	if err := Supported(ctx); err != nil {
		return nil, err
	}
	if err := Cleanup(ctx, cfg.Name); err != nil {
		return nil, fmt.Errorf("netlab: remove leftovers of lab %q: %w", cfg.Name, err)
	}
	l := newLab(cfg)
	register(l)
	if err := build(ctx, &l.cfg); err != nil {
		// Remove with a context of its own: ctx may be what ended.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		return nil, errors.Join(fmt.Errorf("netlab: build lab %q: %w", cfg.Name, err), l.Down(cctx))
	}
	return l, nil
}

// Attach describes a lab that is already up, built by Up with the same
// cfg, possibly in another process (such as `netlab up`), so that faults
// can be injected into it and it can be taken down. The lab's rates are
// taken to be those of cfg.
func Attach(cfg Config) (*Lab, error) {
	if err := cfg.resolve(); err != nil {
		return nil, err
	}
	return newLab(cfg), nil
}

func newLab(cfg Config) *Lab {
	l := &Lab{cfg: cfg, rates: make([]Rate, 2*cfg.Spines)}
	for i := range l.rates {
		l.rates[i] = cfg.SpineRate
	}
	return l
}

// Down removes the lab: it kills the processes still running in its
// namespaces and deletes the namespaces, and with them every link and
// address. It can be called more than once.
func (l *Lab) Down(ctx context.Context) error {
	l.mu.Lock()
	l.down = true
	l.mu.Unlock()
	unregister(l)
	return Cleanup(ctx, l.cfg.Name)
}

// Config returns the lab's configuration, defaults filled in.
func (l *Lab) Config() Config { return l.cfg }

// Hosts is the number of hosts.
func (l *Lab) Hosts() int { return l.cfg.Hosts }

// Spines is the number of spines.
func (l *Lab) Spines() int { return l.cfg.Spines }

// HostAddr is the address of host h, 0 <= h < Hosts().
func (l *Lab) HostAddr(h int) netip.Addr { return hostAddr(h) }

// HostNamespace is the name of host h's network namespace.
func (l *Lab) HostNamespace(h int) string { return l.cfg.hostNS(h) }

// LeafOf is the leaf host h hangs off (0 or 1).
func (l *Lab) LeafOf(h int) int { return leafOf(h) }

// Namespaces lists every namespace of the lab.
func (l *Lab) Namespaces() []string { return l.cfg.namespaces() }

// SpineLinks lists the links between the spines and leaf.
func (l *Lab) SpineLinks(leaf int) []SpineLink {
	var links []SpineLink
	for s := range l.cfg.Spines {
		links = append(links, SpineLink{Spine: s, Leaf: leaf})
	}
	return links
}

// check returns an error unless the lab is up and link is one of its.
func (l *Lab) check(link SpineLink) error {
	l.mu.Lock()
	down := l.down
	l.mu.Unlock()
	switch {
	case down:
		return ErrDown
	case link.Spine < 0 || link.Spine >= l.cfg.Spines || link.Leaf < 0 || link.Leaf > 1:
		return fmt.Errorf("%w: link %v: the lab has spines 0..%d and leaves 0 and 1", ErrConfig, link, l.cfg.Spines-1)
	}
	return nil
}

func (link SpineLink) index() int { return 2*link.Spine + link.Leaf }
