package netlab

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLabUpAndDownLeavesNothingBehind builds a lab, checks that it is what
// the package promises (namespaces, per-namespace sysctls, shaping,
// reachability between all hosts, faults that apply and undo), takes it
// down and checks that the machine is exactly as before.
func TestLabUpAndDownLeavesNothingBehind(t *testing.T) {
	ctx := needLab(t)
	before := readRootState(t)

	l, err := Up(ctx, Config{Name: "updown", Hosts: 4, Spines: 3, SpineRate: 200 * Mbit, HostRate: Gbit})
	require.NoError(t, err)
	downed := false
	t.Cleanup(func() {
		if !downed {
			_ = l.Down(context.Background())
		}
	})
	assert.Len(t, labNamespaces(t, "updown"), 4+2+3)

	for leaf := range 2 {
		for key, want := range map[string]string{"net.ipv4.fib_multipath_hash_policy": "1", "net.ipv4.ip_forward": "1"} {
			got, err := readSysctl(ctx, l.cfg.leafNS(leaf), key)
			require.NoError(t, err)
			assert.Equal(t, want, got, "%s in leaf %d", key, leaf)
		}
	}
	r, _, err := readShaping(ctx, l.cfg.spineNS(2), spineLeafIf(1))
	require.NoError(t, err)
	assert.Equal(t, 200*Mbit, r)
	r, _, err = readShaping(ctx, l.cfg.hostNS(3), hostIfName)
	require.NoError(t, err)
	assert.Equal(t, Gbit, r)

	for from := range l.Hosts() {
		for to := range l.Hosts() {
			if from != to {
				require.NoError(t, transfer(l, from, to, 4<<10), "host %d to host %d", from, to)
			}
		}
	}

	found, err := Discover(ctx, "updown")
	require.NoError(t, err)
	assert.Equal(t, l.Config(), found.Config())

	link := SpineLink{Spine: 1, Leaf: 1}
	require.NoError(t, l.Degrade(ctx, link, 0.1))
	r, _, err = readShaping(ctx, l.cfg.leafNS(1), leafSpineIf(1))
	require.NoError(t, err)
	assert.Equal(t, 20*Mbit, r)
	require.NoError(t, l.Restore(ctx, link))
	require.NoError(t, l.Flap(ctx, link, Flap{Down: 20 * time.Millisecond, Up: 20 * time.Millisecond, For: 150 * time.Millisecond}))
	out, err := run(ctx, "ip", "-n", l.cfg.leafNS(1), "-o", "link", "show", "dev", leafSpineIf(1))
	require.NoError(t, err)
	assert.Contains(t, out, ",UP", "a flap leaves the link up")

	// A process still running on a host is killed with the lab.
	sleeper := l.Command(ctx, 0, "sleep", "300")
	require.NoError(t, sleeper.Start())
	exited := make(chan error, 1)
	go func() { exited <- sleeper.Wait() }()

	require.NoError(t, l.Down(ctx))
	downed = true
	select {
	case err := <-exited:
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit)
		assert.Equal(t, syscall.SIGKILL, exit.Sys().(syscall.WaitStatus).Signal())
	case <-time.After(30 * time.Second):
		t.Fatal("the process on the lab host outlived the lab")
	}
	assert.Empty(t, labNamespaces(t, "updown"))
	assert.Equal(t, before, readRootState(t))
	assert.ErrorIs(t, l.LinkDown(ctx, link), ErrDown)
	require.NoError(t, l.Down(ctx), "Down twice")
}

// TestUpRemovesLeftovers plays a run that crashed with its lab up: the
// next Up of the same name starts from scratch.
func TestUpRemovesLeftovers(t *testing.T) {
	ctx := needLab(t)
	before := readRootState(t)
	_, err := Up(ctx, Config{Name: "leftover", Spines: 2})
	require.NoError(t, err)
	// No Down: the "crashed" run leaves it behind.
	l := upLab(t, ctx, Config{Name: "leftover", Spines: 2})
	assert.Len(t, labNamespaces(t, "leftover"), 2+2+2)
	require.NoError(t, transfer(l, 0, 1, 4<<10))
	require.NoError(t, l.Down(ctx))
	assert.Empty(t, labNamespaces(t, "leftover"))
	assert.Equal(t, before, readRootState(t))
}

// TestInterruptTakesLabsDown sends SIGINT and SIGTERM to a process with a
// lab up: the lab goes, and the process exits as the signal says.
func TestInterruptTakesLabsDown(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			needLab(t)
			before := readRootState(t)
			cmd, out := startHelper(t, "signal")
			waitUp(t, out)
			require.NotEmpty(t, labNamespaces(t, helperLab))
			require.NoError(t, cmd.Process.Signal(sig))
			assert.Equal(t, 128+int(sig), waitExit(t, cmd))
			assert.Empty(t, labNamespaces(t, helperLab))
			assert.Equal(t, before, readRootState(t))
		})
	}
}

// TestPanicTakesLabDown: a test that panics with a lab up still takes it
// down.
func TestPanicTakesLabDown(t *testing.T) {
	needLab(t)
	before := readRootState(t)
	cmd, out := startHelper(t, "panic")
	waitUp(t, out)
	assert.NotEqual(t, 0, waitExit(t, cmd))
	assert.Empty(t, labNamespaces(t, helperLab))
	assert.Equal(t, before, readRootState(t))
}

// TestBadConfigs are refused before anything is built.
func TestBadConfigs(t *testing.T) {
	for _, cfg := range []Config{
		{Name: "Bad-Name"},
		{Name: "waytoolongname"},
		{Hosts: 1},
		{Hosts: MaxHosts + 1},
		{Spines: MaxSpines + 1},
		{SpineRate: -5},
		{QueueDelay: time.Microsecond},
		{Congestion: "no such"},
		{RTOMin: 2 * time.Second},
	} {
		t.Run(fmt.Sprintf("%+v", cfg), func(t *testing.T) {
			_, err := Up(context.Background(), cfg)
			assert.ErrorIs(t, err, ErrConfig)
		})
	}
}

// TestRates reads and writes rates as tc does.
func TestRates(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Rate
		out  string
	}{
		{"100mbit", 100 * Mbit, "100mbit"},
		{"1Gbit", Gbit, "1gbit"},
		{"2.5mbit", 2500 * Kbit, "2500kbit"},
		{"12345bit", 12345, "12345bit"},
		{"unlimited", Unlimited, "unlimited"},
	} {
		r, err := ParseRate(tt.in)
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.want, r, tt.in)
		assert.Equal(t, tt.out, r.String())
	}
	for _, bad := range []string{"", "fast", "-3mbit", "0gbit", "3 furlongs"} {
		_, err := ParseRate(bad)
		assert.ErrorIs(t, err, ErrConfig, bad)
	}
	assert.True(t, strings.HasPrefix(tbfArgs(100*Mbit, 20*time.Millisecond), "tbf rate 100000000bit burst 25000 limit 250000"))
	assert.Contains(t, tbfArgs(Mbit, time.Millisecond), "burst 8192 limit 32768", "floors")
}
