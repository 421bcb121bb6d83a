package experiment

import (
	"context"
	"fmt"
	"time"

	"github.com/rdmacell/rdmacell/bench/netlab"
)

// FaultKind says what a Fault does to its link.
type FaultKind string

// The faults.
const (
	// Healthy leaves the fabric alone.
	Healthy FaultKind = "healthy"
	// Degrade slows the link to Fraction of its rate for the whole run.
	Degrade FaultKind = "degrade"
	// LinkDown takes the link down on its leaf's side (a gray failure)
	// After into the first measured iteration, for For.
	LinkDown FaultKind = "linkdown"
	// Flap makes the link flap as Flap says, from After into the first
	// measured iteration until the run ends.
	Flap FaultKind = "flap"
)

// Fault is what happens to the fabric during a run.
type Fault struct {
	Kind FaultKind
	// Link is the link the fault hits. With Busiest, a LinkDown or a Flap
	// hits instead the spine link to Link.Leaf that carries the most
	// traffic just before, so that the failure is sure to cut flows.
	Link     netlab.SpineLink
	Busiest  bool
	Fraction float64
	After    time.Duration
	For      time.Duration
	Flap     netlab.Flap
}

// busyWindow is how long the traffic is watched to find the busiest link.
const busyWindow = 200 * time.Millisecond

func (f Fault) String() string {
	switch f.Kind {
	case Degrade:
		return fmt.Sprintf("%v at %g of its rate", f.Link, f.Fraction)
	case LinkDown:
		link := f.Link.String()
		if f.Busiest {
			link = fmt.Sprintf("busiest link to leaf%d", f.Link.Leaf)
		}
		return fmt.Sprintf("%s down %v into the run, for %v", link, f.After, f.For)
	case Flap:
		link := f.Link.String()
		if f.Busiest {
			link = fmt.Sprintf("busiest link to leaf%d", f.Link.Leaf)
		}
		return fmt.Sprintf("%s flapping (down %v, up %v)", link, f.Flap.Down, f.Flap.Up)
	}
	return "healthy"
}

// before applies what must be in place when the job starts.
func (f Fault) before(ctx context.Context, l *netlab.Lab) error {
	if f.Kind == Degrade {
		return l.Degrade(ctx, f.Link, f.Fraction)
	}
	return nil
}

// during runs the fault once the measured phase has begun (begun is
// closed then), until ctx ends. It reports the link it hit, and when that
// link first failed (zero if it did not).
func (f Fault) during(ctx context.Context, l *netlab.Lab, begun <-chan struct{}) (netlab.SpineLink, time.Time, error) {
	link := f.Link
	if f.Kind != LinkDown && f.Kind != Flap {
		return link, time.Time{}, nil
	}
	select {
	case <-ctx.Done():
		return link, time.Time{}, nil
	case <-begun:
	}
	wait := f.After
	if f.Busiest {
		wait = max(wait-busyWindow, 0)
	}
	if sleep(ctx, wait) != nil {
		return link, time.Time{}, nil
	}
	if f.Busiest {
		var err error
		if link, err = busiest(ctx, l, f.Link.Leaf); err != nil {
			return link, time.Time{}, err
		}
	}
	at := time.Now()
	if f.Kind == Flap {
		flap := f.Flap
		flap.For = time.Hour // until ctx ends: the run's own end
		return link, at, l.Flap(ctx, link, flap)
	}
	if err := l.LinkDown(context.WithoutCancel(ctx), link); err != nil {
		return link, at, err
	}
	_ = sleep(ctx, f.For)
	return link, at, l.LinkUp(context.WithoutCancel(ctx), link)
}

// busiest watches the spine links to leaf for busyWindow and returns the
// one that carried the most to it.
func busiest(ctx context.Context, l *netlab.Lab, leaf int) (netlab.SpineLink, error) {
	before, err := l.SpineBytes(ctx)
	if err != nil {
		return netlab.SpineLink{}, err
	}
	if err := sleep(ctx, busyWindow); err != nil {
		return netlab.SpineLink{}, err
	}
	after, err := l.SpineBytes(ctx)
	if err != nil {
		return netlab.SpineLink{}, err
	}
	best, most := netlab.SpineLink{Leaf: leaf}, uint64(0)
	for i, c := range after {
		if c.Link.Leaf == leaf && c.ToLeaf-before[i].ToLeaf > most {
			best, most = c.Link, c.ToLeaf-before[i].ToLeaf
		}
	}
	return best, nil
}

// after undoes the fault on link, whatever happened.
func (f Fault) after(ctx context.Context, l *netlab.Lab, link netlab.SpineLink) error {
	switch f.Kind {
	case Degrade:
		return l.Restore(ctx, link)
	case LinkDown, Flap:
		return l.LinkUp(ctx, link)
	}
	return nil
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
