package launcher

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdmacell/rdmacell/bootstrap"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// secretHashes are the secret-hash lines of the ranks in lines.
func secretHashes(lines []string) []string {
	var out []string
	for _, l := range lines {
		if _, rest, ok := strings.Cut(l, "] secret-hash="); ok {
			out = append(out, rest)
		}
	}
	return out
}

func hashOf(secret []byte) string {
	h := sha256.Sum256(secret)
	return hex.EncodeToString(h[:])
}

// etcdClient connects to endpoint the way a stranger (or a member) would.
func etcdClient(t *testing.T, endpoint string, tc *tls.Config) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, TLS: tc, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// TestMultiNodeStoreIsClosed runs a two-node job whose node 0 serves
// etcd, and reads that etcd as strangers do: without TLS, without a
// client certificate, and with the credentials of another job's token,
// each read fails. With the job's own credentials the store holds neither
// the job secret nor a key for it: the secret reached every rank (the
// same one) only through its environment.
func TestMultiNodeStoreIsClosed(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	node0, node1 := startTwoNodes(t, "closed-store", []string{"-block"}, []string{"-block"})
	node0.stdout.waitCount(ctx, t, "blocked", 2)
	node1.stdout.waitCount(ctx, t, "blocked", 2)
	addr := node1.etcdAddr

	read := func(cli *clientv3.Client) (*clientv3.GetResponse, error) {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		return cli.Get(rctx, "", clientv3.WithPrefix())
	}
	_, err := read(etcdClient(t, "http://"+addr, nil))
	assert.Error(t, err, "plain HTTP")
	_, err = read(etcdClient(t, "https://"+addr, &tls.Config{InsecureSkipVerify: true}))
	assert.Error(t, err, "TLS without a client certificate")
	other, err := writeTLS(newToken(), false, "")
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.remove() })
	otherTLS, err := (&bootstrap.TLSFiles{CAFile: other.caFile, CertFile: other.certFile, KeyFile: other.keyFile}).ClientTLS()
	require.NoError(t, err)
	_, err = read(etcdClient(t, "https://"+addr, otherTLS))
	assert.Error(t, err, "another job's token")

	token, err := parseToken(node1.token)
	require.NoError(t, err)
	own, err := writeTLS(token, false, "")
	require.NoError(t, err)
	t.Cleanup(func() { _ = own.remove() })
	ownTLS, err := (&bootstrap.TLSFiles{CAFile: own.caFile, CertFile: own.certFile, KeyFile: own.keyFile}).ClientTLS()
	require.NoError(t, err)
	resp, err := read(etcdClient(t, "https://"+addr, ownTLS))
	require.NoError(t, err, "the job's own credentials")
	require.NotEmpty(t, resp.Kvs, "the job is registered")
	secret := token.jobSecret()
	for _, kv := range resp.Kvs {
		assert.False(t, strings.HasSuffix(string(kv.Key), "/secret"), "key %s", kv.Key)
		assert.NotContains(t, string(kv.Value), string(secret), "key %s holds the secret", kv.Key)
		assert.NotContains(t, string(kv.Value), hex.EncodeToString(secret), "key %s holds the secret", kv.Key)
	}
	hashes := append(secretHashes(node0.stdout.all()), secretHashes(node1.stdout.all())...)
	assert.Equal(t, []string{hashOf(secret), hashOf(secret), hashOf(secret), hashOf(secret)}, hashes)
}

// TestWrongJoinToken starts node 1 with another token than node 0's: it
// does not trust node 0's etcd and says so at once, in one line.
func TestWrongJoinToken(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	common := []string{"--nnodes", "2", "--job", "wrong-token", "-n", "1", "--node-timeout", "1s"}
	node0 := startCellrun(t, nil, append(common, "--node-rank", "0", "--etcd-serve", addr, "--join", NewToken(), bin.rankprog)...)
	// Node 0 is up once it serves: node 1's probe then reaches it.
	waitServing(ctx, t, addr)
	node1 := startCellrun(t, nil, append(common, "--node-rank", "1", "--etcd", addr, "--join", NewToken(), bin.rankprog)...)
	assert.Equal(t, ExitFailure, node1.wait(ctx, t))
	assert.Regexp(t, `^cellrun: node 1: join the nodes of job "wrong-token": .*x509: certificate signed by unknown authority`, ownLine(t, node1))
	assert.Empty(t, node1.stdout.all(), "no rank started")
	_ = node0.cmd.Process.Kill()
}

// TestSingleNodeSecret runs two one-node jobs: each hands its ranks a
// fresh secret, never the one in cellrun's own environment.
func TestSingleNodeSecret(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	stale := strings.Repeat("ab", 32)
	var hashes []string
	for range 2 {
		p := startCellrun(t, []string{"RDMACELL_SECRET=" + stale}, "-n", "2", bin.rankprog)
		require.Equal(t, 0, p.wait(ctx, t), "stderr: %q", p.stderr.all())
		h := secretHashes(p.stdout.all())
		require.Len(t, h, 2)
		assert.Equal(t, h[0], h[1], "the ranks of a job share the secret")
		hashes = append(hashes, h[0])
	}
	staleBytes, _ := hex.DecodeString(stale)
	assert.NotEqual(t, hashes[0], hashes[1], "every job has its own secret")
	assert.NotContains(t, hashes, hashOf(staleBytes), "the secret is never inherited")
}

// waitServing waits until something accepts connections at addr.
func waitServing(ctx context.Context, t *testing.T, addr string) {
	t.Helper()
	for {
		if err := (bootstrap.ClientConfig{Endpoints: []string{addr}}).Probe(ctx); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			require.FailNow(t, fmt.Sprintf("nothing serves %s", addr))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestNodeZeroPrintsToken starts node 0 without a token: it prints one,
// and node 1, given it, joins and the job runs.
func TestNodeZeroPrintsToken(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	common := []string{"--nnodes", "2", "--job", "printed-token", "-n", "1", "--node-timeout", "1s"}
	node0 := startCellrun(t, nil, append(common, "--node-rank", "0", "--etcd-serve", addr, bin.rankprog)...)
	node0.stderr.waitCount(ctx, t, "--join ", 1)
	var token string
	for _, line := range node0.stderr.all() {
		if _, rest, ok := strings.Cut(line, "cellrun: start the other nodes with --join "); ok {
			token, _, _ = strings.Cut(rest, " ")
		}
	}
	_, err := parseToken(token)
	require.NoError(t, err, "node 0 printed %q", node0.stderr.all())
	node1 := startCellrun(t, nil, append(common, "--node-rank", "1", "--etcd", addr, "--join", token, bin.rankprog)...)
	for node, p := range []*cellrunProc{node0, node1} {
		require.Equal(t, 0, p.wait(ctx, t), "node %d: %q", node, p.stderr.all())
		assert.Contains(t, strings.Join(p.stdout.all(), "\n"), "passed barrier", "node %d", node)
	}
	assert.Len(t, ownLines(node0.stderr.all()), 1, "node 0 prints the token, nothing else")
	assert.Empty(t, ownLines(node1.stderr.all()))
}
