package collectives

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/collectives/internal/memp2p"
)

// newWorldHosts makes a world whose rank r is on host hosts[r].
func newWorldHosts(t testing.TB, hosts []string, opts Options) *world {
	t.Helper()
	return newWorldMem(t, memp2p.New(len(hosts)).Hosts(hosts...), func(int) Options { return opts })
}

// hostLayout spreads perHost ranks on each of hosts hosts, the ranks of a host
// either next to each other or dealt out round the hosts.
func hostLayout(hosts, perHost int, dealt bool) []string {
	names := make([]string, hosts*perHost)
	for r := range names {
		h := r / perHost
		if dealt {
			h = r % hosts
		}
		names[r] = fmt.Sprint("node-", h)
	}
	return names
}

// TestHierarchical: a group that spans hosts with several ranks on each
// runs AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast and
// Reduce hierarchically, with the results
// the flat algorithms give, for every type, op, size (slices uneven and
// empty included), root and placement of the ranks on the hosts.
func TestHierarchical(t *testing.T) {
	for _, c := range []struct {
		hosts, per int
		dealt      bool
	}{{2, 2, false}, {2, 2, true}, {3, 2, false}, {2, 3, true}, {4, 2, false}, {2, 4, false}} {
		hosts := hostLayout(c.hosts, c.per, c.dealt)
		t.Run(strings.Join(hosts, ","), func(t *testing.T) {
			t.Parallel()
			w := newWorldHosts(t, hosts, Options{ChunkBytes: smallChunk})
			counts := append(testCounts(w.n), 4*smallChunk+3)
			for _, s := range suites {
				t.Run(s.name, func(t *testing.T) {
					for _, count := range counts {
						for _, inPlace := range []bool{false, true} {
							for _, op := range allOps {
								s.allReduce(t, w, count, op, inPlace)
							}
							s.allGather(t, w, count, inPlace)
							s.allToAll(t, w, count, inPlace)
							s.reduceScatter(t, w, count, Avg, inPlace)
							for _, root := range []int{0, w.n / 2, w.n - 1} {
								s.broadcast(t, w, count, root, inPlace)
								s.reduce(t, w, count, Sum, root, inPlace)
							}
						}
					}
				})
			}
			for r, g := range w.groups {
				require.NotNil(t, g.hier, "rank %d", r)
				require.NotNil(t, g.hier.onHost.shm, "rank %d: the host phase does not share memory", r)
				require.Nil(t, g.hier.across.shm, "rank %d: the phase across hosts shares memory", r)
			}
		})
	}
}

// TestHierarchicalOnlyWhereItFits: one rank per host, hosts of different
// sizes, one host, and a forced flat algorithm all stay flat, and work.
func TestHierarchicalOnlyWhereItFits(t *testing.T) {
	for _, c := range []struct {
		name  string
		hosts []string
		opts  Options
		hier  bool
	}{
		{"hierarchical", hostLayout(2, 2, false), Options{}, true},
		{"forced hierarchical", hostLayout(2, 2, false), Options{Algorithm: Hierarchical}, true},
		{"one rank per host", hostLayout(4, 1, false), Options{}, false},
		{"uneven hosts", []string{"a", "a", "a", "b"}, Options{}, false},
		{"one host", hostLayout(1, 4, false), Options{}, false},
		{"forced ring", hostLayout(2, 2, false), Options{Algorithm: Ring}, false},
		{"forced tree", hostLayout(2, 2, false), Options{Algorithm: Tree}, false},
		{"forced hierarchical, one host", hostLayout(1, 4, false), Options{Algorithm: Hierarchical}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorldHosts(t, c.hosts, c.opts)
			suiteOf("float32").allReduce(t, w, 1000, Avg, false)
			for r, g := range w.groups {
				ran := g.hier != nil && g.hier.onHost != nil
				require.Equal(t, c.hier, ran, "rank %d ran hierarchically", r)
			}
		})
	}
}

// The phases' failures name the rank of the group that failed them.
func TestHierarchicalNamesTheRank(t *testing.T) {
	w := newWorldHosts(t, hostLayout(2, 2, false), Options{})
	suiteOf("float64").allReduce(t, w, 10, Sum, false)
	var oe *OpError
	err := (&run{g: w.groups[0], op: &operation{kind: kAllReduce}}).phaseErr(w.groups[0].hier.cross, "phase across hosts",
		&OpError{Rank: 0, Op: "AllReduce", Peer: 1, Step: 0, Err: ErrInvalidArgument})
	require.ErrorAs(t, err, &oe)
	require.Equal(t, 2, oe.Peer, "peer 1 of the phase across hosts is rank 2 of the group")
	require.ErrorContains(t, err, "hierarchical phase across hosts")
}
