// Package futex waits on and wakes 32-bit words of memory that several
// processes map, with Linux's futex system call.
//
// The shared (not FUTEX_PRIVATE) forms are used because the words live in
// memory files mapped by more than one process: the kernel keys a shared
// futex on the file page, so a waker in one process finds a waiter in
// another.
package futex

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	waitOp = 0 // FUTEX_WAIT
	wakeOp = 1 // FUTEX_WAKE
)

// Wait blocks while *addr holds val, until woken or d has passed (d <= 0
// waits without limit). It may return early for no reason: callers loop.
func Wait(addr *uint32, val uint32, d time.Duration) {
	if d <= 0 {
		unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), waitOp, uintptr(val), 0, 0, 0)
		return
	}
	ts := unix.NsecToTimespec(int64(d))
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), waitOp, uintptr(val), uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// Wake wakes every waiter on addr. A wake never blocks, so it is a raw
// system call: entering it through the runtime would cost, each time the
// runtime's monitor thread sleeps, a wake of that thread too.
func Wake(addr *uint32) {
	unix.RawSyscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), wakeOp, 1<<30, 0, 0, 0)
}
