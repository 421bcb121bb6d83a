package shm

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rdmacell/rdmacell/internal/prefault"
)

// Control segments are anonymous memory files: nothing appears on a file
// system, and the kernel frees them once the last descriptor and mapping
// are gone, so a crash of either process leaves nothing behind. Their size
// is sealed, so that neither side can shrink a file under the other's
// mapping (touching a page past the end of a file is a SIGBUS).
const sizeSeals = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL

// createSegment creates a sealed memory file of size bytes and maps it
// read-write and pre-faulted.
func createSegment(name string, size int) (fd int, b []byte, err error) {
	fd, err = unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, nil, fmt.Errorf("shm: memfd_create %s: %w", name, err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("shm: size %s to %d bytes: %w", name, size, err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, sizeSeals); err != nil {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("shm: seal %s: %w", name, err)
	}
	b, err = unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("shm: map %s: %w", name, err)
	}
	if err := prefault.Pages(b, true); err != nil {
		_ = unix.Munmap(b)
		unix.Close(fd)
		return -1, nil, fmt.Errorf("shm: %s: %w", name, err)
	}
	return fd, b, nil
}

// mapSegment maps the first size bytes of a control segment received from
// a peer, after checking that it is at least that long and that its size
// is sealed.
func mapSegment(fd int, size int, prot int) ([]byte, error) {
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		return nil, fmt.Errorf("shm: segment seals: %w", err)
	}
	if seals&unix.F_SEAL_SHRINK == 0 {
		return nil, fmt.Errorf("shm: segment size is not sealed (seals %#x)", seals)
	}
	n, err := fileSize(fd)
	if err != nil {
		return nil, err
	}
	if n < int64(size) {
		return nil, fmt.Errorf("shm: segment is %d bytes, want at least %d", n, size)
	}
	b, err := unix.Mmap(fd, 0, size, prot, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("shm: map segment: %w", err)
	}
	if err := prefault.Pages(b, prot&unix.PROT_WRITE != 0); err != nil {
		_ = unix.Munmap(b)
		return nil, fmt.Errorf("shm: map segment: %w", err)
	}
	return b, nil
}

// populateMax bounds the memory files whose mappings are populated up
// front. The owner has faulted the pages in already, so populating only
// builds page tables, but a file with holes would have them filled.
const populateMax = 1 << 30

// mapMemory maps a peer's memory file whole, read-write, with its page
// tables populated so that the first write into it does not fault.
func mapMemory(fd int) ([]byte, error) {
	n, err := fileSize(fd)
	if err != nil {
		return nil, err
	}
	if n <= 0 || n > 1<<46 {
		return nil, fmt.Errorf("shm: memory file of %d bytes", n)
	}
	b, err := unix.Mmap(fd, 0, int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("shm: map memory file of %d bytes: %w", n, err)
	}
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	if n <= populateMax {
		if err := prefault.Pages(b, true); err != nil {
			_ = unix.Munmap(b)
			return nil, fmt.Errorf("shm: map memory file of %d bytes: %w", n, err)
		}
	}
	return b, nil
}

func fileSize(fd int) (int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, fmt.Errorf("shm: stat memory file: %w", err)
	}
	return st.Size, nil
}

// dupFd duplicates fd with close-on-exec set.
func dupFd(fd int) (int, error) {
	n, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("shm: dup memory file: %w", err)
	}
	return n, nil
}

// word returns the 32-bit word at off in a mapping. Offsets are fixed by
// the segment layouts and aligned.
func word(b []byte, off int) *uint32 { return (*uint32)(unsafe.Pointer(&b[off])) }

// dword returns the 64-bit word at off in a mapping.
func dword(b []byte, off int) *uint64 { return (*uint64)(unsafe.Pointer(&b[off])) }
