package launcher

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ownedDirPrefixes name the temporary directories cellrun makes, each
// followed by the pid of the cellrun that owns it and a dash: a cellrun
// killed outright (SIGKILL) cannot remove them, so the next one does.
// (The embedded etcd's data directories are swept by bootstrap/etcdserver.)
var ownedDirPrefixes = []string{"cellrun-tls-", "cellrun-build-"}

// sweepDeadDirs removes the directories in tmp that cellrun processes of
// this user, now gone, left behind.
func sweepDeadDirs(tmp string, log *slog.Logger) {
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	uid := os.Getuid()
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		for _, prefix := range ownedDirPrefixes {
			rest, ok := strings.CutPrefix(e.Name(), prefix)
			if !ok {
				continue
			}
			pidText, _, _ := strings.Cut(rest, "-")
			pid, err := strconv.Atoi(pidText)
			if err != nil || pid <= 0 || pid == os.Getpid() || !errors.Is(unix.Kill(pid, 0), unix.ESRCH) {
				continue
			}
			dir := filepath.Join(tmp, e.Name())
			var st unix.Stat_t
			if unix.Lstat(dir, &st) != nil || int(st.Uid) != uid {
				continue
			}
			if err := os.RemoveAll(dir); err == nil {
				log.Debug("removed what a dead cellrun left", "dir", dir)
			}
		}
	}
}
