package launcher

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startTwoNodes starts the two cellrun processes of a two-"node" job on
// this host, two ranks each: node 0 serves etcd, node 1 uses it. Node 1
// starts right away, so it also shows that a node may come up before the
// etcd it needs.
func startTwoNodes(t *testing.T, job string, args0, args1 []string) (node0, node1 *cellrunProc) {
	t.Helper()
	return startTwoNodesWith(t, job, nil, nil, args0, args1)
}

// startTwoNodesWith is startTwoNodes with more cellrun flags for each node.
func startTwoNodesWith(t *testing.T, job string, flags0, flags1, args0, args1 []string) (node0, node1 *cellrunProc) {
	t.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	token := NewToken()
	common := []string{"--nnodes", "2", "--job", job, "-n", "2", "--node-timeout", "1s", "--join", token}
	node0 = startCellrun(t, nil, slices.Concat(common, flags0, []string{"--node-rank", "0", "--etcd-serve", addr, bin.rankprog}, args0)...)
	node1 = startCellrun(t, nil, slices.Concat(common, flags1, []string{"--node-rank", "1", "--etcd", addr, bin.rankprog}, args1)...)
	node0.etcdAddr, node0.token = addr, token
	node1.etcdAddr, node1.token = addr, token
	return node0, node1
}

// TestTwoNodes runs a world of four ranks over two cellrun processes: the
// ranks rendezvous across the "nodes" and pass a barrier together.
func TestTwoNodes(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	node0, node1 := startTwoNodes(t, "two-nodes", nil, nil)
	for node, p := range []*cellrunProc{node0, node1} {
		code := p.wait(ctx, t)
		stdout := p.stdout.all()
		require.Equal(t, 0, code, "node %d\nstdout:\n%s\nstderr:\n%s", node, strings.Join(stdout, "\n"), strings.Join(p.stderr.all(), "\n"))
		assert.Empty(t, ownLines(p.stderr.all()), "node %d", node)
		for local := range 2 {
			r := node*2 + local
			lines := rankLines(stdout, r)
			require.NotEmpty(t, lines, "node %d rank %d", node, r)
			m := envLine.FindStringSubmatch(lines[0])
			require.NotNil(t, m, lines[0])
			assert.Equal(t, []string{strconv.Itoa(r), "4", strconv.Itoa(local), "2", "two-nodes"}, m[1:6], "node %d rank %d", node, r)
			assert.Contains(t, lines, "passed barrier", "node %d rank %d", node, r)
		}
	}
	node0.assertClean(ctx, t, 2)
	node1.assertClean(ctx, t, 2)
}

// TestTwoNodesRankFailure fails a rank on node 1: both nodes stop their
// ranks and exit with its code, after the same line naming it.
func TestTwoNodesRankFailure(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	args := []string{"-block", "-fail-rank", "3", "-code", "5"}
	node0, node1 := startTwoNodes(t, "two-nodes-failure", args, args)

	code1 := node1.wait(ctx, t)
	code0 := node0.wait(ctx, t)
	assert.Equal(t, 5, code1, "node 1, whose rank failed")
	assert.Equal(t, 5, code0, "node 0, told by node 1")

	pid := rankPID(t, node1.stdout.all(), 3)
	want := regexp.MustCompile(`^cellrun: rank 3 \(pid ` + strconv.Itoa(pid) + `, host [^,]+, node 1\) exited with code 5$`)
	for node, p := range []*cellrunProc{node0, node1} {
		own := ownLines(p.stderr.all())
		require.Len(t, own, 1, "node %d: %q", node, own)
		assert.Regexp(t, want, own[0], "node %d", node)
	}
	for _, r := range []int{0, 1} {
		assert.Contains(t, rankLines(node0.stdout.all(), r), "got signal terminated", "rank %d on node 0", r)
	}
	assert.Contains(t, rankLines(node1.stdout.all(), 2), "got signal terminated", "rank 2 on node 1")
	node0.assertClean(ctx, t, 2)
	node1.assertClean(ctx, t, 2)
}

// TestTwoNodesNodeDies kills node 1's cellrun outright: its ranks die with
// it, and node 0 notices the silence, stops its ranks and says why.
func TestTwoNodesNodeDies(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	node0, node1 := startTwoNodes(t, "two-nodes-death", []string{"-block"}, []string{"-block"})
	node0.stdout.waitCount(ctx, t, "blocked", 2)
	node1.signalWhenBlocked(ctx, t, 2, syscall.SIGKILL)
	assert.Equal(t, -1, node1.wait(ctx, t), "killed")

	assert.Equal(t, ExitFailure, node0.wait(ctx, t))
	own := ownLines(node0.stderr.all())
	require.Len(t, own, 1, "%q", own)
	assert.Regexp(t, `^cellrun: node 1 \(cellrun pid `+strconv.Itoa(node1.cmd.Process.Pid)+`, host [^,]+\) died: `, own[0])
	for _, r := range []int{0, 1} {
		assert.Contains(t, rankLines(node0.stdout.all(), r), "got signal terminated", "rank %d on node 0", r)
	}
	node0.assertClean(ctx, t, 2)
	// Node 1's ranks die of their parent's death; only its TMPDIR may keep
	// what a SIGKILL left no chance to remove.
	for _, pid := range node1.pids(t) {
		waitGone(ctx, t, pid)
	}
}
