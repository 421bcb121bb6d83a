package launcher

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/rdmacell/rdmacell/bootstrap"
)

// A rank that exits with an error is often not the cause: when a rank
// hangs, is stopped (SIGSTOP, a debugger) or loses etcd, its lease expires
// and the others fail with a *bootstrap.RankDeadError naming it, which the
// programs print before they exit. cellrun reads that report in the ranks'
// output and blames the rank it names.

// deathReport is a rank's report that another rank died.
type deathReport struct {
	rank int
	host string
	pid  int
}

// deathPattern recognises a RankDeadError of job in a line. It is derived
// from the error's own text, so that the two cannot drift apart; marker is
// a fixed part of it, to skip lines cheaply.
func deathPattern(job string) (pattern *regexp.Regexp, marker []byte) {
	const rank, host, pid = 1234567, "HOST-PLACEHOLDER", 7654321
	text := (&bootstrap.RankDeadError{Job: job, Rank: rank, Host: host, PID: pid}).Error()
	quoted := regexp.QuoteMeta(text)
	quoted = strings.Replace(quoted, strconv.Itoa(rank), `(\d+)`, 1)
	quoted = strings.Replace(quoted, regexp.QuoteMeta(host), `(.*?)`, 1)
	quoted = strings.Replace(quoted, strconv.Itoa(pid), `(\d+)`, 1)
	_, tail, _ := strings.Cut(text, strconv.Itoa(pid))
	return regexp.MustCompile(quoted), []byte(tail)
}

// deathWatch finds the first death report in a rank's output.
type deathWatch struct {
	pattern *regexp.Regexp
	marker  []byte
}

// scan returns the death report in line, if there is one.
func (w *deathWatch) scan(line []byte) (deathReport, bool) {
	if w == nil || len(w.marker) == 0 || !bytes.Contains(line, w.marker) {
		return deathReport{}, false
	}
	m := w.pattern.FindSubmatch(line)
	if m == nil {
		return deathReport{}, false
	}
	rank, err1 := strconv.Atoi(string(m[1]))
	pid, err2 := strconv.Atoi(string(m[3]))
	if err1 != nil || err2 != nil {
		return deathReport{}, false
	}
	return deathReport{rank: rank, host: string(m[2]), pid: pid}, true
}

// blame is the line that names why the job stops when failed, which ended
// as how, is not the cause but a consequence: it reported another rank
// dead, or another rank of this node is stopped. It returns "" when failed
// is the cause as far as cellrun can tell.
func (j *job) blame(failed *rankProc, how string) string {
	report, reported := failed.deathReport()
	j.mu.Lock()
	procs := append([]*rankProc(nil), j.procs...)
	j.mu.Unlock()

	var culprit *rankProc
	for _, r := range procs {
		if r == failed {
			continue
		}
		if reported && r.spec.rank == report.rank && r.pid == report.pid {
			culprit = r
			break
		}
		if !reported && culprit == nil && r.processState() == 'T' {
			culprit = r // stopped, with nobody's report yet
		}
	}
	consequence := failed.describe() + " " + how
	switch {
	case culprit != nil && culprit.processState() == 'T':
		return fmt.Sprintf("%s was stopped (SIGSTOP or a debugger) and declared dead by the others; %s", culprit.describe(), consequence)
	case culprit != nil:
		return fmt.Sprintf("%s was declared dead by the others (its lease expired: hung, or cut off from etcd); %s", culprit.describe(), consequence)
	case reported:
		return fmt.Sprintf("rank %d (pid %d, host %s) was declared dead by the others (its lease expired); %s",
			report.rank, report.pid, report.host, consequence)
	}
	return ""
}

// processState is the state letter of the rank's process in
// /proc/PID/stat ('R', 'S', 'T' for stopped...), or 0 once it has been
// reaped or cannot be read.
func (r *rankProc) processState() byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reaped {
		return 0
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(r.pid) + "/stat")
	if err != nil {
		return 0
	}
	// The state follows the command name, which is in parentheses and may
	// itself hold any character.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return 0
	}
	return stat[i+2]
}
