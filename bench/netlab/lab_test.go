package netlab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLabUpAndDownLeavesNothingBehind builds a lab, checks that it is what
// the package promises (namespaces, per-namespace sysctls, shaping,
// reachability between all hosts, faults that apply and undo), takes it
// down and checks that nothing of it is left and the machine's own
// settings did not move.
func TestLabUpAndDownLeavesNothingBehind(t *testing.T) {
	ctx := needLab(t)
	sysctls := readRootSysctls(t)

	l, err := Up(ctx, Config{Name: "updown", Hosts: 4, Spines: 3, SpineRate: 200 * Mbit, HostRate: Gbit})
	require.NoError(t, err)
	downed := false
	t.Cleanup(func() {
		if !downed {
			_ = l.Down(context.Background())
		}
	})
	assert.Len(t, labNamespaces(t, l.ID()), 4+2+3)
	assert.Empty(t, rootTraces(t, l.ID()))
	assert.Equal(t, os.Getpid(), l.Owner())

	for leaf := range 2 {
		for key, want := range map[string]string{"net.ipv4.fib_multipath_hash_policy": "1", "net.ipv4.ip_forward": "1"} {
			got, err := readSysctl(ctx, l.id.leafNS(leaf), key)
			require.NoError(t, err)
			assert.Equal(t, want, got, "%s in leaf %d", key, leaf)
		}
	}
	r, _, err := readShaping(ctx, l.id.spineNS(2), l.id.spineLeafIf(1))
	require.NoError(t, err)
	assert.Equal(t, 200*Mbit, r)
	r, _, err = readShaping(ctx, l.id.hostNS(3), l.id.hostIf())
	require.NoError(t, err)
	assert.Equal(t, Gbit, r)

	for from := range l.Hosts() {
		for to := range l.Hosts() {
			if from != to {
				require.NoError(t, transfer(l, from, to, 4<<10), "host %d to host %d", from, to)
			}
		}
	}

	found, err := Discover(ctx, l.ID())
	require.NoError(t, err)
	assert.Equal(t, l.Config(), found.Config())

	link := SpineLink{Spine: 1, Leaf: 1}
	require.NoError(t, l.Degrade(ctx, link, 0.1))
	r, _, err = readShaping(ctx, l.id.leafNS(1), l.id.leafSpineIf(1))
	require.NoError(t, err)
	assert.Equal(t, 20*Mbit, r)
	require.NoError(t, l.Restore(ctx, link))
	require.NoError(t, l.Flap(ctx, link, Flap{Down: 20 * time.Millisecond, Up: 20 * time.Millisecond, For: 150 * time.Millisecond}))
	out, err := run(ctx, "ip", "-n", l.id.leafNS(1), "-o", "link", "show", "dev", l.id.leafSpineIf(1))
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
	requireGone(t, l.ID())
	assert.Equal(t, sysctls, readRootSysctls(t))
	assert.ErrorIs(t, l.LinkDown(ctx, link), ErrDown)
	require.NoError(t, l.Down(ctx), "Down twice")
}

// TestTwoLabsAtOnce brings two labs of the same name up at the same time,
// runs traffic through both at once, takes one down and checks that the
// other is whole and still works, then takes that one down too and checks
// that nothing of either is left.
func TestTwoLabsAtOnce(t *testing.T) {
	ctx := needLab(t)
	var labs [2]*Lab
	var errs [2]error
	var wg sync.WaitGroup
	for i := range labs {
		wg.Go(func() { labs[i], errs[i] = Up(ctx, Config{Name: "twin", Spines: 2, SpineRate: 200 * Mbit}) })
	}
	wg.Wait()
	for i, l := range labs {
		if l != nil {
			t.Cleanup(func() { _ = l.Down(context.Background()) })
		}
		require.NoError(t, errs[i], "lab %d", i)
	}
	a, b := labs[0], labs[1]
	require.NotEqual(t, a.ID(), b.ID())
	t.Logf("labs %s and %s", a.ID(), b.ID())

	// Traffic through both at once, each counted by its own spines only:
	// the two labs use the same addresses, in namespaces of their own.
	const size = 1 << 20
	var before [2][]uint64
	for i, l := range labs {
		before[i] = toLeaf(t, ctx, l, 1)
	}
	for i, l := range labs {
		wg.Go(func() { errs[i] = transfer(l, 0, 1, size) })
	}
	wg.Wait()
	for i, l := range labs {
		require.NoError(t, errs[i], "traffic in lab %s", l.ID())
		var carried uint64
		for s, n := range toLeaf(t, ctx, l, 1) {
			carried += n - before[i][s]
		}
		assert.GreaterOrEqual(t, carried, uint64(size), "lab %s's spines carried its traffic", l.ID())
		requireIntact(t, l)
	}

	require.NoError(t, a.Down(ctx))
	requireGone(t, a.ID())
	requireIntact(t, b)
	r, _, err := readShaping(ctx, b.id.leafNS(1), b.id.leafSpineIf(1))
	require.NoError(t, err)
	assert.Equal(t, 200*Mbit, r, "lab %s keeps its shaping", b.ID())

	require.NoError(t, b.Down(ctx))
	requireGone(t, b.ID())
	requireGone(t, a.ID())
}

// TestUpRemovesOnlyLeftovers: a process killed outright leaves its lab
// behind, and the next Up anywhere removes it; the lab of a process that
// still runs stays, whatever asks for its removal, until that process
// takes it down on its way out.
func TestUpRemovesOnlyLeftovers(t *testing.T) {
	ctx := needLab(t)
	crashed, running := startHelper(t, "signal"), startHelper(t, "signal")
	crashedID, runningID := crashed.waitUp(t), running.waitUp(t)
	require.NoError(t, crashed.cmd.Process.Signal(syscall.SIGKILL))
	crashed.waitExit(t)
	require.Len(t, labNamespaces(t, crashedID), 2+2+2, "a process killed outright leaves its lab behind")

	l := upLab(t, ctx, Config{Name: "reaper", Spines: 2})
	requireGone(t, crashedID)
	require.Len(t, labNamespaces(t, runningID), 2+2+2, "the lab of a running process stays")

	// Not even when asked by name or ID. (Not Cleanup(ctx, ""): that
	// would also take down the detached labs of people at work here.)
	for _, query := range []string{runningID, helperLab} {
		removed, err := Cleanup(ctx, query)
		assert.ErrorIs(t, err, ErrInUse, query)
		assert.Empty(t, removed, query)
	}
	found, err := Discover(ctx, runningID)
	require.NoError(t, err)
	assert.ErrorIs(t, found.Down(ctx), ErrInUse, "a lab found is its owner's to take down")
	require.Len(t, labNamespaces(t, runningID), 2+2+2)
	requireIntact(t, l)

	require.NoError(t, running.cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, 128+int(syscall.SIGTERM), running.waitExit(t))
	requireGone(t, runningID)
	requireIntact(t, l)
}

// TestDetachedLab is what `netlab up` leaves: no owner, found by name,
// never taken for a leftover, removed by Cleanup.
func TestDetachedLab(t *testing.T) {
	// A name no one uses by hand: a detached lab of the same name would
	// be in the way.
	const detachedLab = "testdetached"
	ctx := needLab(t)
	d, err := UpDetached(ctx, Config{Name: detachedLab, Spines: 1})
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = Cleanup(context.Background(), d.ID()) })
	assert.Zero(t, d.Owner())
	_, err = UpDetached(ctx, Config{Name: detachedLab, Spines: 1})
	assert.ErrorIs(t, err, ErrInUse, "a second detached lab of the same name")

	found, err := Discover(ctx, detachedLab)
	require.NoError(t, err)
	assert.Equal(t, d.ID(), found.ID())
	// An owned lab of the same name makes the name ambiguous, not the ID.
	owned := upLab(t, ctx, Config{Name: detachedLab, Spines: 1})
	_, err = Discover(ctx, detachedLab)
	assert.ErrorIs(t, err, ErrConfig)
	found, err = Discover(ctx, owned.ID())
	require.NoError(t, err)
	assert.Equal(t, owned.ID(), found.ID())
	requireIntact(t, d)

	removed, err := Cleanup(ctx, detachedLab)
	assert.ErrorIs(t, err, ErrInUse, "the owned lab of that name is not Cleanup's")
	assert.Equal(t, []string{d.ID()}, removed)
	requireGone(t, d.ID())
	requireIntact(t, owned)
}

// TestInterruptTakesLabsDown sends SIGINT and SIGTERM to a process with a
// lab up: the lab goes, and the process exits as the signal says.
func TestInterruptTakesLabsDown(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			needLab(t)
			h := startHelper(t, "signal")
			id := h.waitUp(t)
			require.Len(t, labNamespaces(t, id), 2+2+2)
			require.NoError(t, h.cmd.Process.Signal(sig))
			assert.Equal(t, 128+int(sig), h.waitExit(t))
			requireGone(t, id)
		})
	}
}

// TestPanicTakesLabDown: a test that panics with a lab up still takes it
// down.
func TestPanicTakesLabDown(t *testing.T) {
	needLab(t)
	h := startHelper(t, "panic")
	id := h.waitUp(t)
	assert.NotEqual(t, 0, h.waitExit(t))
	requireGone(t, id)
}

// TestNames checks the names a lab gives its namespaces and interfaces:
// interface names fit in IFNAMSIZ for the largest lab, and every
// namespace name reads back as its lab.
func TestNames(t *testing.T) {
	id := labID{name: strings.Repeat("n", 12), tag: newTag(), owner: 4194304}
	for h := range MaxHosts {
		assert.LessOrEqual(t, len(id.leafHostIf(h)), ifNameMax)
	}
	for s := range MaxSpines {
		assert.LessOrEqual(t, len(id.leafSpineIf(s)), ifNameMax)
	}
	assert.LessOrEqual(t, len(id.hostIf()), ifNameMax)
	assert.LessOrEqual(t, len(id.spineLeafIf(1)), ifNameMax)
	for _, ns := range id.namespaces(MaxHosts, MaxSpines) {
		got, _, ok := parseNamespace(ns)
		require.True(t, ok, ns)
		assert.Equal(t, id, got, ns)
	}
	for _, ns := range []string{"rclab", "rclab-lab-h0", "rclab-lab-abc-1-h0", "rclab-lab-abcdef-x-h0",
		"rclab-lab-abcdef-01-h0", "rclab-lab-abcdef-1-", "rclab-Lab-abcdef-1-h0", "other-lab-abcdef-1-h0"} {
		_, _, ok := parseNamespace(ns)
		assert.False(t, ok, ns)
	}
	assert.NoError(t, checkQuery("lab"))
	assert.NoError(t, checkQuery("lab-abc123"))
	assert.ErrorIs(t, checkQuery("lab-abc"), ErrConfig)
	assert.ErrorIs(t, checkQuery("Lab"), ErrConfig)
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
