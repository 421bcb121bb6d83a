// Package prefault faults a mapping's pages in before it is used, a piece
// at a time.
//
// Mapping a large file with MAP_POPULATE holds the process's mmap lock
// until every page is in: a 2 GiB mapping took 1.3 s here, and for all of
// it every goroutine that grew the Go heap (which maps memory, and so
// waits on that lock) stood still, the lease keep-alive of the bootstrap
// among them. Populating a piece at a time with MADV_POPULATE_WRITE (or
// _READ) lets the lock go between pieces, and reports a failure, such as
// memory running out, as an error instead of a SIGBUS at first touch.
package prefault

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// chunk is how much is populated while the lock is held: a few
// milliseconds of page faults.
const chunk = 16 << 20

// Pages faults every page of b in, for writing if write (b must then be
// mapped writable), else for reading.
func Pages(b []byte, write bool) error {
	advice := unix.MADV_POPULATE_READ
	if write {
		advice = unix.MADV_POPULATE_WRITE
	}
	if !supported() {
		// A kernel before 5.14: read each page, which maps it; a first
		// write then costs a minor fault, not a new page.
		touch(b)
		return nil
	}
	for off := 0; off < len(b); off += chunk {
		end := min(off+chunk, len(b))
		if err := unix.Madvise(b[off:end], advice); err != nil {
			return fmt.Errorf("populate %d bytes at offset %d of %d: %w", end-off, off, len(b), err)
		}
	}
	return nil
}

// supported reports whether the kernel knows MADV_POPULATE_*.
var supported = sync.OnceValue(func() bool {
	b, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return false
	}
	defer unix.Munmap(b)
	return unix.Madvise(b, unix.MADV_POPULATE_READ) == nil
})

// sink takes the sum of the bytes touch reads, so that the compiler cannot
// drop the loads that fault the pages in. Nothing reads it.
//
//lint:ignore U1000 written only, which is its purpose
var sink byte

// touch reads one byte of every page of b.
func touch(b []byte) {
	var s byte
	for i := 0; i < len(b); i += 4096 {
		s += b[i]
	}
	sink = s
}
