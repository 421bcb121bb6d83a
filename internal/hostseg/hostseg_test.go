package hostseg

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestShared(t *testing.T) {
	a, err := Create(8192)
	require.NoError(t, err)
	b, err := Open(a.Name(), 8192)
	require.NoError(t, err)
	defer b.Close()

	a.Bytes()[4000] = 7
	require.Equal(t, byte(7), b.Bytes()[4000], "one memory behind both mappings")

	_, err = Open(a.Name(), 8193)
	require.ErrorContains(t, err, "is 8192 bytes, want 8193")

	require.NoError(t, a.Close())
	_, err = Open(a.Name(), 8192)
	require.ErrorIs(t, err, os.ErrNotExist, "a segment can be opened only while its creator has it")
	b.Bytes()[1] = 9
	require.Equal(t, byte(9), b.Bytes()[1], "the memory outlives the creator's mapping")
}

func TestOpenRejectsNames(t *testing.T) {
	for _, name := range []string{"", "passwd", "1", "1:2:3", "../1:2", "1:x", "-1:2", "1:2/../3"} {
		_, err := Open(name, 1)
		require.ErrorContains(t, err, "is not a segment name", name)
	}
	// A descriptor that is not a segment: this process's standard input,
	// or a memory file whose size is not sealed.
	_, err := Open(fmt.Sprintf("%d:0", os.Getpid()), 1)
	require.Error(t, err)
	fd, err := unix.MemfdCreate("other", unix.MFD_CLOEXEC)
	require.NoError(t, err)
	defer unix.Close(fd)
	require.NoError(t, unix.Ftruncate(fd, 4096))
	_, err = Open(fmt.Sprintf("%d:%d", os.Getpid(), fd), 1)
	require.ErrorContains(t, err, "is not a segment")
}

func TestLocks(t *testing.T) {
	a, err := Create(4096)
	require.NoError(t, err)
	defer a.Close()
	b, err := Open(a.Name(), 4096)
	require.NoError(t, err)
	defer b.Close()

	require.NoError(t, a.Lock(3))
	held, err := b.Held(3)
	require.NoError(t, err)
	require.True(t, held)
	require.Error(t, b.Lock(3), "a lock has one holder")
	held, err = b.Held(2)
	require.NoError(t, err)
	require.False(t, held)

	require.NoError(t, a.Close())
	held, err = b.Held(3)
	require.NoError(t, err)
	require.False(t, held, "closing drops the locks")
}

// TestLockDiesWithProcess: a user killed with SIGKILL no longer holds its
// lock, which is what tells its peers that it is gone.
func TestLockDiesWithProcess(t *testing.T) {
	if name := os.Getenv("HOSTSEG_CHILD"); name != "" {
		s, err := Open(name, 4096)
		if err == nil {
			err = s.Lock(5)
		}
		if err != nil {
			os.Stdout.WriteString("error " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Stdout.WriteString("locked\n")
		select {}
	}
	a, err := Create(4096)
	require.NoError(t, err)
	defer a.Close()

	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run=^TestLockDiesWithProcess$")
	cmd.Env = append(os.Environ(), "HOSTSEG_CHILD="+a.Name())
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "locked\n", line)

	held, err := a.Held(5)
	require.NoError(t, err)
	require.True(t, held, "child pid %d holds its lock", cmd.Process.Pid)
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	held, err = a.Held(5)
	require.NoError(t, err)
	require.False(t, held, "a killed process holds nothing")
}
