package bootstrap

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// Placement is what a process learns of its place in a job from the
// scheduler or launcher that started it, when that is not cellrun: Slurm's
// srun, Open MPI's mpirun, or a PMI launcher such as MPICH's Hydra. It is
// read from the environment by [PlacementFromEnv].
type Placement struct {
	// Source names the launcher: "slurm", "openmpi" or "pmi".
	Source string
	// Rank and WorldSize place the process in the job.
	Rank, WorldSize int
	// LocalRank and LocalWorldSize place it among the job's processes on
	// its node; LocalWorldSize 0 means the launcher does not say.
	LocalRank, LocalWorldSize int
	// Node and Nodes place its node among the job's nodes; Nodes 0 means
	// the launcher does not say.
	Node, Nodes int
	// Job is a job id made from the launcher's own (e.g. "slurm-1234.0"),
	// the same in every process of the job; empty when it gives none.
	Job string
	// StoreHost is where rank 0 runs, when the launcher says (the first
	// node of a Slurm step, or this host when every process is on it),
	// and StorePort a port made from the launcher's job id: together the
	// address of a store served by rank 0, with no configuration.
	StoreHost string
	StorePort int
}

// Ports from which StorePort is chosen: a range below Linux's default
// ephemeral ports (32768 and up), so that a port picked for one job is
// rarely held by an unrelated connection.
const (
	StorePortBase  = 20000
	StorePortRange = 10000
)

// storePort is the port of a store for a launcher's job id.
func storePort(id string) int {
	h := fnv.New32a()
	h.Write([]byte(id))
	return StorePortBase + int(h.Sum32()%StorePortRange)
}

// PlacementFromEnv reads the environment of a process started by srun,
// mpirun or a PMI launcher, through lookup (os.LookupEnv in a program). It
// reports false when none of them started it. A launcher that is there but
// gives values that do not fit together is an error naming the variables.
//
// Open MPI's variables are used first, then PMI's, then Slurm's: mpirun
// run inside a Slurm allocation inherits the allocation's SLURM_* (which
// do not number its ranks), while srun itself, given --mpi=pmi2, sets
// PMI_RANK to SLURM_PROCID, and is then taken as Slurm.
func PlacementFromEnv(lookup func(string) (string, bool)) (Placement, bool, error) {
	get := func(name string) string { v, _ := lookup(name); return strings.TrimSpace(v) }
	switch {
	case get("OMPI_COMM_WORLD_RANK") != "":
		return openMPIPlacement(get)
	case get("PMI_RANK") != "" && !(get("SLURM_STEP_ID") != "" && get("SLURM_PROCID") == get("PMI_RANK")):
		return pmiPlacement(get)
	case get("SLURM_STEP_ID") != "" && get("SLURM_PROCID") != "":
		return slurmPlacement(get)
	}
	return Placement{}, false, nil
}

// placementReader parses variables and collects what is wrong with them.
type placementReader struct {
	get  func(string) string
	errs []error
}

// count reads a required integer in [lo, hi].
func (r *placementReader) count(name string, lo, hi int) int {
	v := r.get(name)
	n, err := strconv.Atoi(v)
	switch {
	case v == "":
		r.errs = append(r.errs, fmt.Errorf("%s is not set", name))
	case err != nil || n < lo || n > hi:
		r.errs = append(r.errs, fmt.Errorf("%s=%q: want an integer in %d..%d", name, v, lo, hi))
	}
	return n
}

// optional reads an integer in [lo, hi] that may be unset (then def).
func (r *placementReader) optional(name string, lo, hi, def int) int {
	if r.get(name) == "" {
		return def
	}
	return r.count(name, lo, hi)
}

func (r *placementReader) done(p Placement) (Placement, bool, error) {
	if len(r.errs) > 0 {
		return Placement{}, true, fmt.Errorf("bootstrap: started by %s, but %w", p.Source, errors.Join(r.errs...))
	}
	return p, true, nil
}

const maxCount = 1 << 30

// rankAndSize reads a rank and world size pair.
func (r *placementReader) rankAndSize(p *Placement, rankVar, sizeVar string) {
	p.WorldSize = r.count(sizeVar, 1, maxCount)
	hi := maxCount
	if p.WorldSize >= 1 {
		hi = p.WorldSize - 1
	}
	p.Rank = r.count(rankVar, 0, hi)
}

// local reads a local rank and local world size pair, both optional.
func (r *placementReader) local(p *Placement, rankVar, sizeVar string) {
	if r.get(sizeVar) == "" {
		return
	}
	p.LocalWorldSize = r.count(sizeVar, 1, max(p.WorldSize, 1))
	p.LocalRank = r.count(rankVar, 0, max(p.LocalWorldSize-1, 0))
}

func slurmPlacement(get func(string) string) (Placement, bool, error) {
	r := &placementReader{get: get}
	p := Placement{Source: "slurm"}
	r.rankAndSize(&p, "SLURM_PROCID", "SLURM_NTASKS")
	p.Nodes = r.count("SLURM_NNODES", 1, max(p.WorldSize, 1))
	if p.Nodes >= 1 {
		p.Node = r.count("SLURM_NODEID", 0, p.Nodes-1)
	}
	p.LocalRank = r.optional("SLURM_LOCALID", 0, max(p.WorldSize-1, 0), 0)
	if tpn := get("SLURM_STEP_TASKS_PER_NODE"); tpn != "" && len(r.errs) == 0 {
		counts, err := ParseTasksPerNode(tpn)
		switch {
		case err != nil:
			r.errs = append(r.errs, fmt.Errorf("SLURM_STEP_TASKS_PER_NODE=%q: %w", tpn, err))
		case len(counts) != p.Nodes:
			r.errs = append(r.errs, fmt.Errorf("SLURM_STEP_TASKS_PER_NODE=%q names %d nodes, SLURM_NNODES %d", tpn, len(counts), p.Nodes))
		case p.LocalRank >= counts[p.Node]:
			r.errs = append(r.errs, fmt.Errorf("SLURM_LOCALID %d, but SLURM_STEP_TASKS_PER_NODE=%q gives node %d %d tasks", p.LocalRank, tpn, p.Node, counts[p.Node]))
		default:
			p.LocalWorldSize = counts[p.Node]
		}
	}
	jobID, stepID := get("SLURM_JOB_ID"), get("SLURM_STEP_ID")
	if !decimal.MatchString(jobID) {
		r.errs = append(r.errs, fmt.Errorf("SLURM_JOB_ID=%q: want the job's number", jobID))
	}
	if !decimal.MatchString(stepID) {
		r.errs = append(r.errs, fmt.Errorf("SLURM_STEP_ID=%q: want the step's number", stepID))
	}
	p.Job = "slurm-" + jobID + "." + stepID
	p.StorePort = storePort(p.Job)
	if list := get("SLURM_STEP_NODELIST"); list != "" {
		hosts, err := ParseHostlist(list)
		switch {
		case err != nil:
			r.errs = append(r.errs, fmt.Errorf("SLURM_STEP_NODELIST=%q: %w", list, err))
		case len(hosts) != p.Nodes && p.Nodes > 0:
			r.errs = append(r.errs, fmt.Errorf("SLURM_STEP_NODELIST=%q names %d nodes, SLURM_NNODES %d", list, len(hosts), p.Nodes))
		default:
			p.StoreHost = hosts[0]
		}
	}
	return r.done(p)
}

func openMPIPlacement(get func(string) string) (Placement, bool, error) {
	r := &placementReader{get: get}
	p := Placement{Source: "openmpi"}
	r.rankAndSize(&p, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE")
	r.local(&p, "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE")
	id := get("PMIX_NAMESPACE")
	if id == "" {
		id = get("OMPI_MCA_ess_base_jobid")
	}
	launcherJob(&p, "ompi-", id)
	return r.done(p)
}

func pmiPlacement(get func(string) string) (Placement, bool, error) {
	r := &placementReader{get: get}
	p := Placement{Source: "pmi"}
	r.rankAndSize(&p, "PMI_RANK", "PMI_SIZE")
	r.local(&p, "MPI_LOCALRANKID", "MPI_LOCALNRANKS")
	launcherJob(&p, "pmi-", get("PMIX_NAMESPACE"))
	return r.done(p)
}

// launcherJob names the job of an MPI launcher, and its store when every
// rank is on this host. Without a namespace, ranks that all run on this
// host share their parent, the launcher's local daemon (orted, prted,
// hydra_pmi_proxy), so its pid tells this launch from another.
func launcherJob(p *Placement, prefix, namespace string) {
	if namespace == "" && p.LocalWorldSize == p.WorldSize {
		namespace = "ppid" + strconv.Itoa(os.Getppid())
	}
	if namespace != "" {
		p.Job = prefix + jobUnsafe.ReplaceAllString(namespace, "-")
		p.StorePort = storePort(p.Job)
	}
	if p.LocalWorldSize == p.WorldSize {
		p.StoreHost = "127.0.0.1"
	}
}

var (
	decimal   = regexp.MustCompile(`^[0-9]+$`)
	jobUnsafe = regexp.MustCompile(`[^A-Za-z0-9._-]+`)
)

// maxHostlist bounds the hosts a hostlist expands to, so that a range such
// as n[0-999999999] is an error rather than a exhausted memory.
const maxHostlist = 1 << 20

// ParseHostlist expands a Slurm hostlist, such as "node[01-03,7],gpu1",
// into host names in order: "node01", "node02", "node03", "node7", "gpu1".
// A bracket holds comma-separated numbers and ranges; a range keeps the
// width of its first bound ("01-03"). Several brackets in one name expand
// as a product ("r[1-2]n[1-2]": r1n1, r1n2, r2n1, r2n2), as Slurm does.
func ParseHostlist(s string) ([]string, error) {
	var hosts []string
	for len(s) > 0 {
		// One name runs to the first comma outside brackets.
		depth, end := 0, len(s)
	scan:
		for i, c := range s {
			switch c {
			case '[':
				depth++
				if depth > 1 {
					return nil, fmt.Errorf("nested '[' at offset %d", i)
				}
			case ']':
				depth--
				if depth < 0 {
					return nil, fmt.Errorf("']' without '[' at offset %d", i)
				}
			case ',':
				if depth == 0 {
					end = i
					break scan
				}
			}
		}
		if depth != 0 {
			return nil, fmt.Errorf("'[' without ']' in %q", s)
		}
		name := s[:end]
		s = s[min(end+1, len(s)):]
		if name == "" {
			return nil, errors.New("empty host name")
		}
		expanded, err := expandHost(name, len(hosts))
		if err != nil {
			return nil, err
		}
		hosts = append(hosts, expanded...)
	}
	if len(hosts) == 0 {
		return nil, errors.New("no hosts")
	}
	return hosts, nil
}

// expandHost expands the brackets of one name; have is the count of hosts
// already expanded, for the bound.
func expandHost(name string, have int) ([]string, error) {
	open := strings.IndexByte(name, '[')
	if open < 0 {
		if strings.ContainsRune(name, ']') {
			return nil, fmt.Errorf("']' without '[' in %q", name)
		}
		return []string{name}, nil
	}
	closing := strings.IndexByte(name, ']')
	prefix, body, rest := name[:open], name[open+1:closing], name[closing+1:]
	var middles []string
	for part := range strings.SplitSeq(body, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		if !decimal.MatchString(lo) || isRange && !decimal.MatchString(hi) {
			return nil, fmt.Errorf("%q in %q: want a number or a range such as 01-04", part, name)
		}
		if !isRange {
			middles = append(middles, lo)
			continue
		}
		a, errA := strconv.Atoi(lo)
		b, errB := strconv.Atoi(hi)
		if errA != nil || errB != nil || b < a {
			return nil, fmt.Errorf("range %q in %q: want low-high with low <= high", part, name)
		}
		if have+len(middles)+(b-a+1) > maxHostlist {
			return nil, fmt.Errorf("%q expands to more than %d hosts", name, maxHostlist)
		}
		for n := a; n <= b; n++ {
			middles = append(middles, fmt.Sprintf("%0*d", len(lo), n))
		}
	}
	tails, err := expandHost(rest, have)
	if err != nil {
		return nil, err
	}
	if have+len(middles)*len(tails) > maxHostlist {
		return nil, fmt.Errorf("%q expands to more than %d hosts", name, maxHostlist)
	}
	out := make([]string, 0, len(middles)*len(tails))
	for _, m := range middles {
		for _, t := range tails {
			out = append(out, prefix+m+t)
		}
	}
	return out, nil
}

// ParseTasksPerNode expands Slurm's tasks-per-node list, such as
// "2(x3),1" (SLURM_STEP_TASKS_PER_NODE), into one count per node:
// 2, 2, 2, 1.
func ParseTasksPerNode(s string) ([]int, error) {
	var counts []int
	for part := range strings.SplitSeq(s, ",") {
		n, rep := part, "1"
		if i := strings.IndexByte(part, '('); i >= 0 {
			if !strings.HasPrefix(part[i:], "(x") || !strings.HasSuffix(part, ")") {
				return nil, fmt.Errorf("%q: want N or N(xM)", part)
			}
			n, rep = part[:i], part[i+2:len(part)-1]
		}
		c, err1 := strconv.Atoi(n)
		k, err2 := strconv.Atoi(rep)
		if err1 != nil || err2 != nil || c < 1 || k < 1 || len(counts)+k > maxHostlist {
			return nil, fmt.Errorf("%q: want N or N(xM) with N, M >= 1", part)
		}
		for range k {
			counts = append(counts, c)
		}
	}
	return counts, nil
}
