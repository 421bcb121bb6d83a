package netlab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"time"
)

// Lab is a fabric in network namespaces. Its methods are safe for
// concurrent use; after Down they return ErrDown.
type Lab struct {
	cfg Config
	id  labID

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

// Up builds the lab cfg describes, owned by this process: every name it
// creates is its own (see ID), so that any number of labs, of any names,
// can be up at once, in this process and others. The leftovers of labs
// whose processes died without taking them down are removed first; the
// labs of running processes are never touched. If building fails,
// whatever was built is removed again. The lab stays until Down, also
// when ctx ends later; HandleSignals takes it down on an interrupt.
func Up(ctx context.Context, cfg Config) (*Lab, error) {
	return up(ctx, cfg, os.Getpid())
}

// UpDetached is Up for a lab that outlives this process, as `netlab up`
// leaves one: nobody owns it, so it is never taken for a leftover, and it
// stays until Cleanup (`netlab down`) removes it. Its name must not be
// that of another detached lab, so that the name alone finds it.
func UpDetached(ctx context.Context, cfg Config) (*Lab, error) {
	if err := cfg.resolve(); err != nil {
		return nil, err
	}
	labs, err := labsUp(ctx)
	if err != nil {
		return nil, err
	}
	for id := range labs {
		if id.owner == 0 && id.name == cfg.Name {
			return nil, fmt.Errorf("%w: a detached lab called %q is up already (%s): take it down with netlab down --name %s",
				ErrInUse, cfg.Name, id, id)
		}
	}
	return up(ctx, cfg, 0)
}

func up(ctx context.Context, cfg Config, owner int) (*Lab, error) {
	if err := cfg.resolve(); err != nil {
		return nil, err
	}
	if err := Supported(ctx); err != nil {
		return nil, err
	}
	if err := reapLeftovers(ctx); err != nil {
		return nil, err
	}
	l := newLab(cfg, labID{name: cfg.Name, owner: owner})
	// The tag is drawn while registering, so that no two labs of this
	// process share one; labs of other processes differ by their owner.
	register(l)
	if err := build(ctx, l); err != nil {
		// Remove with a context of its own: ctx may be what ended.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		return nil, errors.Join(fmt.Errorf("netlab: build lab %s: %w", l.id, err), l.Down(cctx))
	}
	return l, nil
}

func newLab(cfg Config, id labID) *Lab {
	l := &Lab{cfg: cfg, id: id, rates: make([]Rate, 2*cfg.Spines)}
	for i := range l.rates {
		l.rates[i] = cfg.SpineRate
	}
	return l
}

// Down removes the lab: it kills the processes still running in its
// namespaces and deletes the namespaces, and with them every link and
// address. It touches nothing of any other lab. It can be called more
// than once. A lab found with Discover that a running process owns is
// that process's to take down: Down refuses it with ErrInUse.
func (l *Lab) Down(ctx context.Context) error {
	if l.id.owner != 0 && l.id.owner != os.Getpid() && processAlive(l.id.owner) {
		return fmt.Errorf("%w: lab %s belongs to process %d, which still runs", ErrInUse, l.id, l.id.owner)
	}
	l.mu.Lock()
	l.down = true
	l.mu.Unlock()
	unregister(l)
	namespaces, err := namespacesOf(ctx, l.id)
	if err != nil {
		return err
	}
	return removeNamespaces(ctx, namespaces)
}

// ID tells this lab apart from every other lab up on the machine: its
// name and a random tag, such as "failover-k3x9qa". Every namespace of
// the lab carries the ID, every interface the tag.
func (l *Lab) ID() string { return l.id.String() }

// Owner is the pid of the process that owns the lab (the one that built
// it with Up), 0 for a detached lab.
func (l *Lab) Owner() int { return l.id.owner }

// Config returns the lab's configuration, defaults filled in.
func (l *Lab) Config() Config { return l.cfg }

// Hosts is the number of hosts.
func (l *Lab) Hosts() int { return l.cfg.Hosts }

// Spines is the number of spines.
func (l *Lab) Spines() int { return l.cfg.Spines }

// HostAddr is the address of host h, 0 <= h < Hosts().
func (l *Lab) HostAddr(h int) netip.Addr { return hostAddr(h) }

// HostNamespace is the name of host h's network namespace.
func (l *Lab) HostNamespace(h int) string { return l.id.hostNS(h) }

// LeafOf is the leaf host h hangs off (0 or 1).
func (l *Lab) LeafOf(h int) int { return leafOf(h) }

// Namespaces lists every namespace of the lab.
func (l *Lab) Namespaces() []string { return l.id.namespaces(l.cfg.Hosts, l.cfg.Spines) }

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

func (l SpineLink) index() int { return 2*l.Spine + l.Leaf }
