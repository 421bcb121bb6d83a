package netlab

import (
	"context"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMain takes every lab down on SIGINT or SIGTERM, and after the tests
// whatever a failed test left up.
func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "signal" {
		os.Exit(runSignalHelper())
	}
	stop := HandleSignals()
	code := m.Run()
	stop()
	DownAll()
	os.Exit(code)
}

// needLab skips t unless labs can be built here, and returns a context
// bounding the test.
func needLab(t *testing.T) context.Context {
	t.Helper()
	if err := Supported(context.Background()); err != nil {
		t.Skipf("the lab needs root and network namespaces (ip netns): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// upLab brings a lab up for t and takes it down when t ends, also when it
// fails or panics.
func upLab(t *testing.T, ctx context.Context, cfg Config) *Lab {
	t.Helper()
	l, err := Up(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, l.Down(ctx))
	})
	return l
}

// rootSysctls are the settings the lab changes inside its namespaces;
// their values in the machine's own namespace must never move.
var rootSysctls = []string{
	"net/ipv4/ip_forward",
	"net/ipv4/fib_multipath_hash_policy",
	"net/ipv4/conf/all/rp_filter",
	"net/ipv4/conf/default/rp_filter",
	"net/ipv6/conf/all/disable_ipv6",
	"net/ipv6/conf/default/disable_ipv6",
	"net/ipv4/tcp_congestion_control",
	"net/core/txrehash",
}

// readRootSysctls reads rootSysctls in this process's namespace, the
// machine's own.
func readRootSysctls(t *testing.T) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, key := range rootSysctls {
		if b, err := os.ReadFile("/proc/sys/" + key); err == nil {
			m[key] = strings.TrimSpace(string(b))
		}
	}
	return m
}

// rootTraces lists what the machine's own namespace shows of the lab
// whose ID is id: links, addresses and routes that name one of its
// interfaces. It looks only for this lab's names, so other labs, and
// whatever else runs on the machine, cannot disturb it. It must always
// be empty: a lab creates every link inside its namespaces.
func rootTraces(t *testing.T, id string) []string {
	t.Helper()
	_, tag, ok := strings.Cut(id, "-")
	require.True(t, ok, "lab ID %q", id)
	var traces []string
	for _, args := range [][]string{
		{"-o", "link", "show"},
		{"-o", "addr", "show"},
		{"route", "show", "table", "all"},
	} {
		out, err := exec.Command("ip", args...).Output()
		require.NoError(t, err, "ip %v", args)
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, tag+"-") {
				traces = append(traces, line)
			}
		}
	}
	return traces
}

// labNamespaces lists the namespaces of the lab whose ID is id.
func labNamespaces(t *testing.T, id string) []string {
	t.Helper()
	labs, err := labsUp(context.Background())
	require.NoError(t, err)
	var ours []string
	for lid, ns := range labs {
		if lid.String() == id {
			ours = append(ours, ns...)
		}
	}
	sort.Strings(ours)
	return ours
}

// requireGone checks that nothing of the lab whose ID is id is left.
func requireGone(t *testing.T, id string) {
	t.Helper()
	require.Empty(t, labNamespaces(t, id), "namespaces of lab %s", id)
	require.Empty(t, rootTraces(t, id), "lab %s in the root namespace", id)
}

// requireIntact checks that every namespace of l is there, that l shows
// nowhere outside them, and that its hosts reach each other.
func requireIntact(t *testing.T, l *Lab) {
	t.Helper()
	want := l.Namespaces()
	sort.Strings(want)
	require.Equal(t, want, labNamespaces(t, l.ID()), "namespaces of lab %s", l.ID())
	require.Empty(t, rootTraces(t, l.ID()), "lab %s in the root namespace", l.ID())
	require.NoError(t, transfer(l, 0, 1, 64<<10), "lab %s carries traffic", l.ID())
}
