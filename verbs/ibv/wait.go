//go:build ibverbs && cgo

package ibv

// #include "shim.h"
import "C"

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rdmacell/rdmacell/verbs"
)

const (
	// spinFor is how long Wait polls before it parks: a completion that
	// arrives within a few microseconds is taken without two system calls
	// and a thread wake-up.
	spinFor = 20 * time.Microsecond
	// maxPark bounds one sleep in poll(2). Every wake-up has a cause (an
	// event, a cancelled context, Close); the bound only makes a missed
	// one cost a second instead of a hang.
	maxPark = time.Second
)

// waiter is the wake-up descriptor of one parked Wait: an eventfd that a
// cancelled context, Close or another waiter writes to. Each parked Wait
// has its own, so a wake-up meant for one waiter is never consumed by
// another. The mutex keeps a late wake-up (a context callback still
// running when its Wait returned) from writing to a closed descriptor
// whose number the process may have reused.
type waiter struct {
	mu sync.Mutex
	fd int // -1 once closed
}

func newWaiter() (*waiter, error) {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("ibv: eventfd: %w", err)
	}
	return &waiter{fd: fd}, nil
}

func (w *waiter) wake() {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd >= 0 {
		_, _ = unix.Write(w.fd, one[:])
	}
}

// clear resets the counter after a wake-up. A stale wake-up left behind
// only costs its next user one extra turn of the wait loop.
func (w *waiter) clear() {
	var b [8]byte
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd >= 0 {
		_, _ = unix.Read(w.fd, b[:])
	}
}

func (w *waiter) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd >= 0 {
		_ = unix.Close(w.fd)
		w.fd = -1
	}
}

// Wait implements verbs.CQ. It polls, spins for spinFor, and then parks
// in poll(2) on the completion channel (armed with ibv_req_notify_cq) and
// on its own wake-up descriptor, so that an idle CQ costs no CPU and the
// context and Close still end the wait at once.
func (cq *CQ) Wait(ctx context.Context, wc []verbs.WC) (int, error) {
	if len(wc) == 0 {
		return 0, fmt.Errorf("%w: Wait with no room for a completion", verbs.ErrInvalidArgument)
	}
	start := time.Now()
	for i := 0; ; i++ {
		if n := cq.Poll(wc); n > 0 {
			return n, nil
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if cq.isClosed() {
			return 0, fmt.Errorf("ibv: wait: %w", verbs.ErrClosed)
		}
		if i%16 == 15 {
			if time.Since(start) > spinFor {
				return cq.park(ctx, wc)
			}
			runtime.Gosched()
		}
	}
}

func (cq *CQ) isClosed() bool {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	return cq.closed
}

// park sleeps until a completion, the context's end or Close.
func (cq *CQ) park(ctx context.Context, wc []verbs.WC) (int, error) {
	w, err := cq.enter()
	if err != nil {
		return 0, err
	}
	defer cq.leave(w)
	stop := context.AfterFunc(ctx, w.wake)
	defer stop()
	fds := []unix.PollFd{{Fd: int32(cq.chFD), Events: unix.POLLIN}, {Fd: int32(w.fd), Events: unix.POLLIN}}
	for {
		// Arm first, then poll: a completion that arrived before the arm
		// is found by the poll, one after it raises an event.
		if err := cq.arm(w); err != nil {
			return 0, err
		}
		if n := cq.Poll(wc); n > 0 {
			return n, nil
		}
		if cq.isClosed() {
			return 0, fmt.Errorf("ibv: wait: %w", verbs.ErrClosed)
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		timeout := maxPark
		if dl, ok := ctx.Deadline(); ok {
			timeout = min(timeout, time.Until(dl))
		}
		ms := int((timeout + time.Millisecond - 1) / time.Millisecond)
		if _, err := unix.Poll(fds, max(ms, 0)); err != nil && !errors.Is(err, unix.EINTR) {
			return 0, fmt.Errorf("ibv: poll completion channel: %w", err)
		}
		if fds[1].Revents != 0 {
			w.clear()
		}
	}
}

// enter registers a parked waiter, reusing an idle descriptor.
func (cq *CQ) enter() (*waiter, error) {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.closed {
		return nil, fmt.Errorf("ibv: wait: %w", verbs.ErrClosed)
	}
	var w *waiter
	if k := len(cq.idle); k > 0 {
		w, cq.idle = cq.idle[k-1], cq.idle[:k-1]
	} else {
		var err error
		if w, err = newWaiter(); err != nil {
			return nil, err
		}
	}
	cq.parked[w] = struct{}{}
	return w, nil
}

func (cq *CQ) leave(w *waiter) {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	delete(cq.parked, w)
	w.clear()
	if cq.closed {
		w.close()
	} else {
		cq.idle = append(cq.idle, w)
	}
	cq.left.Broadcast()
}

// arm acknowledges the channel's pending events and asks for an event at
// the next completion. A waiter that consumed events wakes the others:
// the completions behind them may be more than it takes.
func (cq *CQ) arm(self *waiter) error {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.closed {
		return fmt.Errorf("ibv: wait: %w", verbs.ErrClosed)
	}
	n := C.rc_drain_events(cq.ch)
	if n < 0 {
		return fmt.Errorf("ibv: read completion channel: %w", errnoOf(n))
	}
	if n > 0 {
		for w := range cq.parked {
			if w != self {
				w.wake()
			}
		}
	}
	if rc := C.ibv_req_notify_cq(cq.cq, 0); rc != 0 {
		return fmt.Errorf("ibv: ibv_req_notify_cq: %w", errnoOf(rc))
	}
	return nil
}
