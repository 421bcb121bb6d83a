package etcdserver

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Data directories of servers whose caller gave none are
// dataDirPrefix<pid>-<random> in the temporary directory, each holding a
// lock file that its server holds locked (flock) while it runs. The kernel
// drops the lock when the process dies, however it dies, so a directory
// whose lock can be taken belongs to nobody and is removed by the next
// server that starts (sweepDataDirs).
const (
	dataDirPrefix = "rdmacell-etcd-"
	lockFileName  = "owner.lock"
)

// makeDataDir creates a private data directory in tmp and locks it.
func makeDataDir(tmp string) (string, *os.File, error) {
	dir, err := os.MkdirTemp(tmp, dataDirPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return "", nil, err
	}
	lock, err := os.OpenFile(filepath.Join(dir, lockFileName), os.O_RDWR|os.O_CREATE, 0o600)
	if err == nil {
		err = unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err != nil {
			_ = lock.Close()
		}
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return dir, lock, nil
}

// sweepDataDirs removes the data directories in tmp left by servers of
// this user that died without Close. A directory without its lock file is
// being created, or was left by a server that died while creating it: it
// is removed only when the process its name gives is gone.
func sweepDataDirs(tmp string, log *slog.Logger) {
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	uid := os.Getuid()
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), dataDirPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		dir := filepath.Join(tmp, e.Name())
		var st unix.Stat_t
		if unix.Lstat(dir, &st) != nil || int(st.Uid) != uid {
			continue
		}
		if !ownerGone(dir, rest) {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			log.Debug("cannot remove a dead server's etcd data dir", "dir", dir, "err", err)
			continue
		}
		log.Debug("removed the etcd data dir of a server that died", "dir", dir)
	}
}

// ownerGone reports whether the server of data directory dir, whose name
// ends in rest ("<pid>-<random>"), is no longer running: its lock is free
// (or was never made) and its process is gone. A free lock alone is not
// enough: a server locks its file a moment after creating it. A lock that
// has been free for a minute is enough, whatever runs under the pid now.
func ownerGone(dir, rest string) bool {
	pidText, _, _ := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 0 {
		return false
	}
	processGone := errors.Is(unix.Kill(pid, 0), unix.ESRCH)
	lock, err := os.OpenFile(filepath.Join(dir, lockFileName), os.O_RDWR, 0)
	if err != nil {
		return errors.Is(err, os.ErrNotExist) && processGone
	}
	defer lock.Close() // which lets go of the lock if we took it
	if unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		return false
	}
	info, err := lock.Stat()
	return processGone || (err == nil && time.Since(info.ModTime()) > time.Minute)
}
