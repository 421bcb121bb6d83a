package etcdserver

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServerUnixSocket serves on a unix socket in the private data
// directory: a rank joins through it, nobody else can reach the directory,
// and Close removes it.
func TestServerUnixSocket(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	ctx := testContext(t)
	srv, err := Start(ctx, Config{Unix: true, Logger: quietLogger()})
	require.NoError(t, err)
	ep := srv.Endpoints()[0]
	require.True(t, strings.HasPrefix(ep, "unix:///"), ep)
	dir := filepath.Dir(strings.TrimPrefix(ep, "unix://"))
	info, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), info.Mode().Perm(), "the socket's directory is private")

	requireServes(t, srv)
	require.NoError(t, srv.Close(ctx))
	_, err = os.Stat(dir)
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// TestSweepDataDirs leaves data directories as dead servers do and checks
// that the next server removes those, and only those.
func TestSweepDataDirs(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)

	// A process that has exited, and been reaped: its pid is free.
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	deadPID := strconv.Itoa(dead.Process.Pid)

	mk := func(name string, lock bool) string {
		dir := filepath.Join(tmp, name)
		require.NoError(t, os.Mkdir(dir, 0o700))
		if lock {
			require.NoError(t, os.WriteFile(filepath.Join(dir, lockFileName), nil, 0o600))
		}
		return dir
	}
	deadUnlocked := mk(dataDirPrefix+deadPID+"-1", true) // died after locking: the kernel let go
	deadNoLock := mk(dataDirPrefix+deadPID+"-2", false)  // died before creating its lock
	aliveNoLock := mk(dataDirPrefix+strconv.Itoa(os.Getpid())+"-3", false)
	notOurs := mk("rdmacell-other", false)
	live, lock, err := makeDataDir(tmp) // a running server's
	require.NoError(t, err)
	defer lock.Close()

	srv, err := Start(testContext(t), Config{Unix: true, Logger: quietLogger()})
	require.NoError(t, err)
	defer srv.Close(context.Background())
	for _, dir := range []string{deadUnlocked, deadNoLock} {
		_, err := os.Stat(dir)
		assert.ErrorIs(t, err, os.ErrNotExist, "%s belonged to a dead server", dir)
	}
	for _, dir := range []string{aliveNoLock, notOurs, live} {
		_, err := os.Stat(dir)
		assert.NoError(t, err, "%s is not a dead server's", dir)
	}
}
