package flight

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// StallNote is how a rank asks for a stall report, and says when its
// stall is over.
type StallNote struct {
	Round int    `json:"round"`
	By    int    `json:"by"`
	What  string `json:"what"`
	// Waited is how long the wait had lasted at At; Over says it has
	// ended.
	Waited time.Duration `json:"waited"`
	At     time.Time     `json:"at"`
	Over   bool          `json:"over,omitempty"`
}

// Status is what a rank is doing, as it answers a stall report.
type Status struct {
	Rank int       `json:"rank"`
	Host string    `json:"host"`
	PID  int       `json:"pid"`
	Time time.Time `json:"time"`
	// Round is the stall report this status answers.
	Round int          `json:"round"`
	Comms []CommStatus `json:"comms"`
	// Waits are the point-to-point messages (not a collective's) the rank
	// has waited on longest, oldest first.
	Waits []string `json:"waits,omitempty"`
}

// CommStatus is a rank's view of one communicator.
type CommStatus struct {
	ID uint64 `json:"id"`
	// Ranks lists the job ranks of its members, by communicator rank.
	Ranks []int `json:"ranks"`
	// Last is the newest operation the rank recorded on it; Open the
	// ones running, oldest first.
	Last *Op  `json:"last,omitempty"`
	Open []Op `json:"open,omitempty"`
	// Paths describes the connections to the peers the open operations
	// wait on, by the peer's job rank.
	Paths []PeerPaths `json:"paths,omitempty"`
}

// PeerPaths is the state of the paths to one peer; Err is why
// operations with it fail, "" while it works.
type PeerPaths struct {
	Peer  int          `json:"peer"`
	Err   string       `json:"err,omitempty"`
	Links []LinkStatus `json:"links"`
}

// LinkStatus is one connection to a peer ("control", "bulk") and its
// paths.
type LinkStatus struct {
	Name  string       `json:"name"`
	Paths []PathStatus `json:"paths"`
}

// PathStatus is one path of a connection.
type PathStatus struct {
	Path  int    `json:"path"`
	State string `json:"state"` // "up", "resetting", "dead", ...
	// Attempts counts the incarnations of the path's QPs: resets
	// completed or started over; Outstanding the cells posted on it
	// without a token yet.
	Attempts    uint64        `json:"attempts,omitempty"`
	Outstanding int           `json:"outstanding,omitempty"`
	SRTT        time.Duration `json:"srtt"`
}

// Summarize names the cause of a stall from the statuses the ranks of a
// job of size ranks sent: for each communicator whose operations wait,
// the ranks that have not entered the operation the others wait in, or
// else who waits for whom and on which path. It returns one line per
// finding, most telling first.
func Summarize(size int, sts []Status, now time.Time) []string {
	byRank := make(map[int]*Status, len(sts))
	for i := range sts {
		byRank[sts[i].Rank] = &sts[i]
	}
	var lines []string
	var silent []int
	for r := range size {
		if byRank[r] == nil {
			silent = append(silent, r)
		}
	}
	for _, id := range waitingComms(sts) {
		lines = append(lines, summarizeComm(id, byRank, now)...)
	}
	if len(silent) > 0 {
		lines = append(lines, fmt.Sprintf("%s did not answer (stopped, or not in the job any more)", ranksPhrase(silent, "rank", "ranks")))
	}
	for _, st := range sts {
		for _, w := range st.Waits {
			lines = append(lines, fmt.Sprintf("rank %d waits for %s", st.Rank, w))
		}
	}
	return lines
}

// waitingComms returns the ids of the communicators with an open
// operation at some rank, in increasing order.
func waitingComms(sts []Status) []uint64 {
	var ids []uint64
	for _, st := range sts {
		for _, c := range st.Comms {
			if len(c.Open) > 0 && !slices.Contains(ids, c.ID) {
				ids = append(ids, c.ID)
			}
		}
	}
	slices.Sort(ids)
	return ids
}

func summarizeComm(id uint64, byRank map[int]*Status, now time.Time) []string {
	// The operation waited in: the newest open one of any member.
	var stalled *Op
	var members []int
	view := make(map[int]*CommStatus)
	for _, st := range byRank {
		for i := range st.Comms {
			c := &st.Comms[i]
			if c.ID != id {
				continue
			}
			view[st.Rank] = c
			if members == nil {
				members = c.Ranks
			}
			for j := range c.Open {
				if o := &c.Open[j]; stalled == nil || o.Seq > stalled.Seq {
					stalled = o
				}
			}
		}
	}
	if stalled == nil {
		return nil
	}
	what := fmt.Sprintf("%s #%d", stalled.Name, stalled.Seq)
	if id != 1 {
		what += fmt.Sprintf(" of communicator %#x", id)
	}
	var in, behind, absent []int
	var oldest time.Time
	for _, r := range members {
		c := view[r]
		if c == nil {
			continue // did not answer: said once for the job
		}
		switch {
		case openSeq(c, stalled.Seq) != nil:
			in = append(in, r)
			if o := openSeq(c, stalled.Seq); oldest.IsZero() || o.Start.Before(oldest) {
				oldest = o.Start
			}
		case c.Last == nil || c.Last.Seq < stalled.Seq:
			absent = append(absent, r)
		case len(c.Open) > 0:
			behind = append(behind, r)
		}
	}
	waited := now.Sub(oldest).Round(time.Second)
	var lines []string
	if len(absent) > 0 {
		lines = append(lines, fmt.Sprintf("%s not entered %s; %s waited in it for %s",
			ranksPhrase(absent, "rank has", "ranks have"), what, ranksPhrase(in, "rank has", "ranks have"), waited))
	}
	if len(behind) > 0 {
		lines = append(lines, fmt.Sprintf("%s still in an earlier operation than %s", ranksPhrase(behind, "rank is", "ranks are"), what))
	}
	if len(absent) > 0 || len(behind) > 0 {
		return lines
	}
	// Every member is in it: say who waits for whom, and on what.
	for _, r := range in {
		c := view[r]
		o := openSeq(c, stalled.Seq)
		if o.Peer < 0 || o.Peer >= len(c.Ranks) {
			lines = append(lines, fmt.Sprintf("rank %d waits in %s for %s", r, what, now.Sub(o.Start).Round(time.Second)))
			continue
		}
		peer := c.Ranks[o.Peer]
		line := fmt.Sprintf("rank %d waits in %s for rank %d (%s", r, what, peer, waitPhrase(o))
		if p := pathsPhrase(c, peer); p != "" {
			line += "; " + p
		}
		lines = append(lines, line+")")
	}
	return lines
}

func openSeq(c *CommStatus, seq uint64) *Op {
	for i := range c.Open {
		if c.Open[i].Seq == seq {
			return &c.Open[i]
		}
	}
	return nil
}

func waitPhrase(o *Op) string {
	var b strings.Builder
	switch o.Dir {
	case Send:
		b.WriteString("to take what it sends")
	case Recv:
		b.WriteString("to send to it")
	case Memory:
		b.WriteString("to arrive in host memory")
	default:
		b.WriteString("waiting")
	}
	if o.Step >= 0 {
		fmt.Fprintf(&b, ", step %d", o.Step)
	}
	return b.String()
}

// pathsPhrase describes the paths to peer that are not simply up.
func pathsPhrase(c *CommStatus, peer int) string {
	for _, pp := range c.Paths {
		if pp.Peer != peer {
			continue
		}
		var parts []string
		if pp.Err != "" {
			parts = append(parts, "failed: "+pp.Err)
		}
		for _, l := range pp.Links {
			for _, p := range l.Paths {
				if p.State == "up" {
					continue
				}
				s := fmt.Sprintf("%s path %d %s", l.Name, p.Path, p.State)
				if p.Attempts > 0 {
					s += fmt.Sprintf(", %d attempts", p.Attempts)
				}
				parts = append(parts, s)
			}
		}
		if len(parts) == 0 {
			return "all paths up"
		}
		return strings.Join(parts, "; ")
	}
	return ""
}

// ranksPhrase is "rank 3 <one>" or "ranks 0-2, 5 <many>".
func ranksPhrase(rs []int, one, many string) string {
	if len(rs) == 1 {
		return fmt.Sprintf("rank %d%s", rs[0], strings.TrimPrefix(one, "rank"))
	}
	return fmt.Sprintf("ranks %s%s", FormatRanks(rs), strings.TrimPrefix(many, "ranks"))
}

// FormatRanks formats ranks compactly, in increasing order: "0-2, 5",
// and "0, 1" for two in a row.
func FormatRanks(rs []int) string {
	rs = slices.Clone(rs)
	slices.Sort(rs)
	var b strings.Builder
	for i := 0; i < len(rs); {
		j := i
		for j+1 < len(rs) && rs[j+1] == rs[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		switch {
		case j == i:
			fmt.Fprintf(&b, "%d", rs[i])
		case j == i+1:
			fmt.Fprintf(&b, "%d, %d", rs[i], rs[j])
		default:
			fmt.Fprintf(&b, "%d-%d", rs[i], rs[j])
		}
		i = j + 1
	}
	return b.String()
}
