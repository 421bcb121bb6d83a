package netlab

import (
	"context"
	"fmt"
	"time"
)

// Floors of the token bucket and the queue of a shaped link: a bucket must
// hold a full-sized frame, and a queue a few of them even at low rates.
const (
	minBurst = 8 << 10
	minLimit = 32 << 10
	// burstTime is the time the bucket's depth is worth at the link's
	// rate: small enough to shape smoothly, large enough that the timer
	// that refills it is not the bottleneck.
	burstTime = 2 * time.Millisecond
)

// tbfArgs are the parameters of a tbf qdisc at rate r.
func tbfArgs(r Rate, queue time.Duration) string {
	bytesPer := func(d time.Duration) int64 { return int64(r.BytesPerSecond() * d.Seconds()) }
	burst := max(bytesPer(burstTime), minBurst)
	limit := max(bytesPer(queue), minLimit, 2*burst)
	return fmt.Sprintf("tbf rate %dbit burst %d limit %d", int64(r), burst, limit)
}

// shapeAll puts a tbf on both ends of every spine link and, with a
// HostRate, of every host link.
func shapeAll(ctx context.Context, lab *Lab) error {
	c, id := &lab.cfg, lab.id
	for l := range 2 {
		var b batch
		if c.SpineRate != Unlimited {
			for s := range c.Spines {
				b.add("qdisc add dev", id.leafSpineIf(s), "root", tbfArgs(c.SpineRate, c.QueueDelay))
			}
		}
		if c.HostRate != Unlimited {
			for h := l; h < c.Hosts; h += 2 {
				b.add("qdisc add dev", id.leafHostIf(h), "root", tbfArgs(c.HostRate, c.QueueDelay))
			}
		}
		if err := tcBatch(ctx, id.leafNS(l), &b); err != nil {
			return err
		}
	}
	if c.SpineRate != Unlimited {
		for s := range c.Spines {
			var b batch
			for l := range 2 {
				b.add("qdisc add dev", id.spineLeafIf(l), "root", tbfArgs(c.SpineRate, c.QueueDelay))
			}
			if err := tcBatch(ctx, id.spineNS(s), &b); err != nil {
				return err
			}
		}
	}
	if c.HostRate != Unlimited {
		for h := range c.Hosts {
			var b batch
			b.add("qdisc add dev", id.hostIf(), "root", tbfArgs(c.HostRate, c.QueueDelay))
			if err := tcBatch(ctx, id.hostNS(h), &b); err != nil {
				return err
			}
		}
	}
	return nil
}

// SetRate shapes link, in both directions, to rate r: a fraction of the
// lab's SpineRate degrades the path, SpineRate restores it. It takes
// effect at once, while traffic runs. Unlimited removes the shaping.
func (l *Lab) SetRate(ctx context.Context, link SpineLink, r Rate) error {
	if err := l.check(link); err != nil {
		return err
	}
	if r == 0 || r < Unlimited {
		return fmt.Errorf("%w: rate %v for %v", ErrConfig, r, link)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.rates[link.index()]
	var verb string
	switch {
	case old == Unlimited && r == Unlimited:
		return nil
	case r == Unlimited:
		verb = "del"
	case old == Unlimited:
		verb = "add"
	default:
		verb = "change"
	}
	ends := []struct{ ns, dev string }{
		{l.id.leafNS(link.Leaf), l.id.leafSpineIf(link.Spine)},
		{l.id.spineNS(link.Spine), l.id.spineLeafIf(link.Leaf)},
	}
	for _, end := range ends {
		var b batch
		if verb == "del" {
			b.add("qdisc del dev", end.dev, "root")
		} else {
			b.add("qdisc", verb, "dev", end.dev, "root", tbfArgs(r, l.cfg.QueueDelay))
		}
		if err := tcBatch(ctx, end.ns, &b); err != nil {
			return fmt.Errorf("netlab: set rate of %v to %v: %w", link, r, err)
		}
	}
	l.rates[link.index()] = r
	return nil
}

// Degrade shapes link to fraction (0 < fraction <= 1) of the lab's
// SpineRate.
func (l *Lab) Degrade(ctx context.Context, link SpineLink, fraction float64) error {
	if l.cfg.SpineRate == Unlimited || fraction <= 0 || fraction > 1 {
		return fmt.Errorf("%w: degrade %v to %g of %v: want a fraction in (0, 1] of a limited rate",
			ErrConfig, link, fraction, l.cfg.SpineRate)
	}
	return l.SetRate(ctx, link, Rate(max(1, fraction*float64(l.cfg.SpineRate))))
}

// Restore gives link back the lab's SpineRate.
func (l *Lab) Restore(ctx context.Context, link SpineLink) error {
	return l.SetRate(ctx, link, l.cfg.SpineRate)
}
