package shm

import (
	"sync/atomic"
	"time"

	"github.com/rdmacell/rdmacell/internal/futex"
)

// bell is an engine's doorbell: a sequence word that every event bumps and
// a flag the engine raises before it sleeps. A ringer pays for the wake
// system call only when the engine is actually asleep.
//
// The engine reads seq before it looks for work and sleeps only if seq is
// unchanged, so an event published after that read is never missed: either
// the ringer sees the sleeping flag and wakes it, or the engine sees seq
// move and does not sleep.
type bell struct {
	seq      *uint32
	sleeping *uint32
}

// ring records an event and wakes the engine if it sleeps.
func (b bell) ring() {
	atomic.AddUint32(b.seq, 1)
	if atomic.LoadUint32(b.sleeping) != 0 {
		futex.Wake(b.seq)
	}
}

// sleep parks the engine until the bell rings after it read seen, or d
// passes.
func (b bell) sleep(seen uint32, d time.Duration) {
	atomic.StoreUint32(b.sleeping, 1)
	if atomic.LoadUint32(b.seq) == seen {
		futex.Wait(b.seq, seen, d)
	}
	atomic.StoreUint32(b.sleeping, 0)
}

// load returns the current sequence value.
func (b bell) load() uint32 { return atomic.LoadUint32(b.seq) }
