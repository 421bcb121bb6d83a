package prefault

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// resident counts the pages of b in memory.
func resident(t *testing.T, b []byte) int {
	t.Helper()
	vec := make([]byte, (len(b)+4095)/4096)
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0])))
	require.Zero(t, errno)
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// Every page of a mapping of a memory file is in after Pages, written or
// read, across several pieces.
func TestPages(t *testing.T) {
	for _, write := range []bool{true, false} {
		const size = 3*chunk + 5*4096
		fd, err := unix.MemfdCreate("prefault-test", unix.MFD_CLOEXEC)
		require.NoError(t, err)
		require.NoError(t, unix.Ftruncate(fd, size))
		prot := unix.PROT_READ
		if write {
			prot |= unix.PROT_WRITE
		}
		b, err := unix.Mmap(fd, 0, size, prot, unix.MAP_SHARED)
		require.NoError(t, err)
		require.Zero(t, resident(t, b), "pages in before Pages")
		require.NoError(t, Pages(b, write))
		require.Equal(t, size/4096, resident(t, b), "write=%v", write)
		require.NoError(t, unix.Munmap(b))
		require.NoError(t, unix.Close(fd))
	}
}

// Populating for writing a read-only mapping is an error, not a crash.
func TestPagesError(t *testing.T) {
	fd, err := unix.MemfdCreate("prefault-test", unix.MFD_CLOEXEC)
	require.NoError(t, err)
	defer unix.Close(fd)
	require.NoError(t, unix.Ftruncate(fd, 1<<20))
	b, err := unix.Mmap(fd, 0, 1<<20, unix.PROT_READ, unix.MAP_SHARED)
	require.NoError(t, err)
	defer unix.Munmap(b)
	require.ErrorContains(t, Pages(b, true), "populate")
}
