package netlab

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// LinkDown takes link down on its leaf's side, the far side for traffic
// headed to that leaf's hosts. The leaf stops sending into the spine, but
// the other leaf sees nothing wrong and keeps hashing flows onto the
// spine, which can no longer deliver them and drops them: a gray failure,
// for the flows whose hash lands there, in the direction of link.Leaf.
func (l *Lab) LinkDown(ctx context.Context, link SpineLink) error {
	return l.setLink(ctx, link, "down")
}

// LinkUp brings link back after LinkDown.
func (l *Lab) LinkUp(ctx context.Context, link SpineLink) error {
	return l.setLink(ctx, link, "up")
}

func (l *Lab) setLink(ctx context.Context, link SpineLink, state string) error {
	if err := l.check(link); err != nil {
		return err
	}
	var b batch
	b.add("link set dev", l.id.leafSpineIf(link.Spine), state)
	if err := ipBatch(ctx, l.id.leafNS(link.Leaf), &b); err != nil {
		return fmt.Errorf("netlab: set %v %s: %w", link, state, err)
	}
	return nil
}

// Flap describes a flapping link: down for Down, up for Up, again and
// again, for For in all.
type Flap struct {
	Down, Up, For time.Duration
}

// maxFlapCycles bounds a flap, whatever its durations say.
const maxFlapCycles = 100000

// Flap makes link flap as f says, then leaves it up. It returns after
// f.For, or when ctx ends, with the link up either way (unless bringing
// it up failed, which the error says).
func (l *Lab) Flap(ctx context.Context, link SpineLink, f Flap) error {
	if f.Down <= 0 || f.Up <= 0 || f.For <= 0 {
		return fmt.Errorf("%w: flap %+v: want positive durations", ErrConfig, f)
	}
	end := time.Now().Add(f.For)
	var err error
	for i := 0; i < maxFlapCycles && err == nil && time.Now().Before(end); i++ {
		if err = l.LinkDown(ctx, link); err == nil {
			err = sleep(ctx, min(f.Down, time.Until(end)))
		}
		// Up before the next check, so that the link ends up.
		if upErr := l.LinkUp(context.WithoutCancel(ctx), link); upErr != nil {
			return errors.Join(err, upErr)
		}
		if err == nil {
			err = sleep(ctx, min(f.Up, time.Until(end)))
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
