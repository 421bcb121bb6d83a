package launcher

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// What one rank costs against the machine's limits. They are floors, not
// estimates of a real program: a limit that cannot even hold them is
// refused before anything starts, with the limit named; a program that
// needs more than its floor fails as a rank that cannot start or run,
// which cellrun names too.
const (
	// tasksPerRank: a Go program runs at least this many threads (the
	// main one, sysmon, a GC worker, one in a blocking system call), and
	// process limits count threads.
	tasksPerRank = 4
	// filesPerRank: the read ends of the rank's stdout and stderr, their
	// write ends while it starts, its log file and its connection to the
	// embedded etcd.
	filesPerRank = 6
	// filesReserve is what cellrun itself keeps open; filesEtcd is what an
	// embedded etcd insists on (it exits below 150 descriptors).
	filesReserve = 16
	filesEtcd    = 150
)

// machineLimit is one limit the ranks count against: how much is left of
// it, and how to name it in an error.
type machineLimit struct {
	name    string
	left    int64
	perRank int64
	unit    string // what left and perRank count
}

// checkMachineLimits refuses a ProcsPerNode the machine cannot start:
// RLIMIT_NPROC (for a user other than root), the pids cgroup, and
// RLIMIT_NOFILE, of which an embedded etcd takes its share. Limits that
// cannot be read are not checked.
func checkMachineLimits(ranks int, embeddedEtcd bool) error {
	for _, l := range machineLimits(embeddedEtcd) {
		if l.left < int64(ranks)*l.perRank {
			return &FlagError{Flag: "-n/--nproc-per-node", Value: strconv.Itoa(ranks),
				Want: fmt.Sprintf("this machine allows at most %d ranks here: %s leaves room for %d %s, and a rank needs at least %d",
					max(l.left/l.perRank, 0), l.name, max(l.left, 0), l.unit, l.perRank)}
		}
	}
	return nil
}

// machineLimits reads the limits that apply to this process now.
func machineLimits(embeddedEtcd bool) []machineLimit {
	var out []machineLimit
	var rl unix.Rlimit
	if unix.Geteuid() != 0 && unix.Getrlimit(unix.RLIMIT_NPROC, &rl) == nil && rl.Cur != unix.RLIM_INFINITY {
		if used, ok := userTasks(os.Getuid()); ok {
			out = append(out, machineLimit{name: fmt.Sprintf("RLIMIT_NPROC (ulimit -u %d, %d in use)", rl.Cur, used),
				left: int64(rl.Cur) - used, perRank: tasksPerRank, unit: "tasks"})
		}
	}
	if l, ok := pidsCgroupLimit(); ok {
		out = append(out, l)
	}
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil && rl.Cur != unix.RLIM_INFINITY {
		if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
			reserve, name := int64(filesReserve), fmt.Sprintf("RLIMIT_NOFILE of cellrun (ulimit -n %d, %d open)", rl.Cur, len(fds))
			if embeddedEtcd {
				reserve += filesEtcd
				name = fmt.Sprintf("RLIMIT_NOFILE of cellrun (ulimit -n %d, %d open, %d for its embedded etcd)", rl.Cur, len(fds), filesEtcd)
			}
			out = append(out, machineLimit{
				name:    name,
				left:    int64(rl.Cur) - int64(len(fds)) - reserve,
				perRank: filesPerRank,
				unit:    "descriptors",
			})
		}
	}
	return out
}

// userTasks counts the threads of uid's processes, which RLIMIT_NPROC
// limits.
func userTasks(uid int) (int64, bool) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	var n int64
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		status, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue // gone meanwhile
		}
		var ruid, threads int64 = -1, 0
		for _, line := range strings.Split(string(status), "\n") {
			if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
				if f := strings.Fields(rest); len(f) > 0 {
					ruid, _ = strconv.ParseInt(f[0], 10, 64)
				}
			}
			if rest, ok := strings.CutPrefix(line, "Threads:"); ok {
				threads, _ = strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
			}
		}
		if ruid == int64(uid) {
			n += threads
		}
	}
	return n, true
}

// pidsCgroupLimit is the tightest pids limit of this process's cgroup and
// its ancestors, pids.max less pids.current, in the pids hierarchy of
// cgroup v1 if there is one, else in cgroup v2's.
func pidsCgroupLimit() (machineLimit, bool) {
	text, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return machineLimit{}, false
	}
	var root, path string
	for _, line := range strings.Split(string(text), "\n") {
		f := strings.SplitN(line, ":", 3)
		switch {
		case len(f) != 3:
		case slices.Contains(strings.Split(f[1], ","), "pids"):
			root, path = "/sys/fs/cgroup/pids", f[2]
		case f[0] == "0" && f[1] == "" && root == "":
			root, path = "/sys/fs/cgroup", f[2]
		}
	}
	if root == "" {
		return machineLimit{}, false
	}
	best, found := machineLimit{perRank: tasksPerRank, unit: "tasks"}, false
	for dir := filepath.Join(root, path); ; dir = filepath.Dir(dir) {
		maxText, err1 := os.ReadFile(filepath.Join(dir, "pids.max"))
		curText, err2 := os.ReadFile(filepath.Join(dir, "pids.current"))
		if err1 == nil && err2 == nil {
			limit, err1 := strconv.ParseInt(strings.TrimSpace(string(maxText)), 10, 64) // "max": no limit
			cur, err2 := strconv.ParseInt(strings.TrimSpace(string(curText)), 10, 64)
			if err1 == nil && err2 == nil && (!found || limit-cur < best.left) {
				best.left, found = limit-cur, true
				best.name = fmt.Sprintf("the pids cgroup %s (pids.max %d, %d in use)", dir, limit, cur)
			}
		}
		if len(dir) <= len(root) {
			break
		}
	}
	return best, found
}
