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

// rootState is what the machine's own network looks like from the root
// namespace: the lab must leave it exactly as it found it.
type rootState struct {
	namespaces, links, addrs, routes string
	sysctls                          map[string]string
}

// rootSysctls are the settings the lab changes inside its namespaces;
// their root values must not move.
var rootSysctls = []string{
	"net/ipv4/ip_forward",
	"net/ipv4/fib_multipath_hash_policy",
	"net/ipv4/conf/all/rp_filter",
	"net/ipv4/conf/default/rp_filter",
	"net/ipv6/conf/all/disable_ipv6",
	"net/ipv6/conf/default/disable_ipv6",
	"net/ipv4/tcp_congestion_control",
}

func readRootState(t *testing.T) rootState {
	t.Helper()
	cmd := func(args ...string) string {
		out, err := exec.Command(args[0], args[1:]...).Output()
		require.NoError(t, err, "%v", args)
		return string(out)
	}
	s := rootState{
		namespaces: cmd("ip", "netns", "list"),
		links:      cmd("ip", "-o", "link", "show"),
		addrs:      cmd("ip", "-o", "addr", "show"),
		routes:     cmd("ip", "route", "show", "table", "all"),
		sysctls:    map[string]string{},
	}
	for _, key := range rootSysctls {
		b, err := os.ReadFile("/proc/sys/" + key)
		if err == nil {
			s.sysctls[key] = strings.TrimSpace(string(b))
		}
	}
	return s
}

// labNamespaces lists the namespaces of the lab called name.
func labNamespaces(t *testing.T, name string) []string {
	t.Helper()
	all, err := listNamespaces(context.Background())
	require.NoError(t, err)
	var ours []string
	for _, ns := range all {
		if strings.HasPrefix(ns, labPrefix(name)) {
			ours = append(ours, ns)
		}
	}
	sort.Strings(ours)
	return ours
}
