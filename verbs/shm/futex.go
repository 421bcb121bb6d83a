package shm

import (
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Futex operations. The shared (not FUTEX_PRIVATE) forms are used because
// the words live in memory files mapped by two processes: the kernel keys a
// shared futex on the file page, so a waker in the peer finds the waiter.
const (
	futexWaitOp = 0 // FUTEX_WAIT
	futexWakeOp = 1 // FUTEX_WAKE
)

// futexWait blocks while *addr holds val, until woken or d has passed
// (d <= 0 waits without limit). Spurious returns are fine: callers loop.
func futexWait(addr *uint32, val uint32, d time.Duration) {
	if d <= 0 {
		unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWaitOp, uintptr(val), 0, 0, 0)
		return
	}
	ts := unix.NsecToTimespec(int64(d))
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWaitOp, uintptr(val), uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// futexWake wakes the waiters on addr.
func futexWake(addr *uint32) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWakeOp, 1<<30, 0, 0, 0)
}

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
		futexWake(b.seq)
	}
}

// sleep parks the engine until the bell rings after it read seen, or d
// passes.
func (b bell) sleep(seen uint32, d time.Duration) {
	atomic.StoreUint32(b.sleeping, 1)
	if atomic.LoadUint32(b.seq) == seen {
		futexWait(b.seq, seen, d)
	}
	atomic.StoreUint32(b.sleeping, 0)
}

// load returns the current sequence value.
func (b bell) load() uint32 { return atomic.LoadUint32(b.seq) }
