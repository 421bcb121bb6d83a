package ibv

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/stretchr/testify/require"
)

func gidOf(s string) [16]byte { return netip.MustParseAddr(s).As16() }

func entry(i int, addr string, typ int) gidEntry {
	return gidEntry{index: i, gid: gidOf(addr), typ: typ}
}

func TestChooseGID(t *testing.T) {
	const (
		v1 = gidTypeRoCEv1
		v2 = gidTypeRoCEv2
		un = gidTypeUnknown
	)
	tests := []struct {
		name  string
		link  int
		table []gidEntry
		want  int
	}{
		{"RoCE port with IPv4: the IPv4-mapped RoCEv2 entry", linkLayerEthernet, []gidEntry{
			entry(0, "fe80::1", v1), entry(1, "fe80::1", v2),
			entry(2, "::ffff:10.0.0.1", v1), entry(3, "::ffff:10.0.0.1", v2),
		}, 3},
		{"IPv6 only: global before link-local", linkLayerEthernet, []gidEntry{
			entry(0, "fe80::1", v1), entry(1, "fe80::1", v2),
			entry(2, "2001:db8::1", v1), entry(3, "2001:db8::1", v2),
		}, 3},
		{"link-local RoCEv2 as a last resort", linkLayerEthernet, []gidEntry{
			entry(0, "fe80::1", v1), entry(1, "fe80::1", v2),
		}, 1},
		{"types unknown: the second of an IPv4-mapped pair", linkLayerEthernet, []gidEntry{
			entry(0, "fe80::1", un), entry(1, "fe80::1", un),
			entry(2, "::ffff:10.0.0.1", un), entry(3, "::ffff:10.0.0.1", un),
		}, 3},
		{"types unknown, single IPv4-mapped entry", linkLayerEthernet, []gidEntry{
			entry(0, "fe80::1", un), entry(4, "::ffff:10.0.0.1", un),
		}, 4},
		{"RoCEv1 only", linkLayerEthernet, []gidEntry{
			entry(0, "::", v1), entry(1, "fe80::1", v1),
		}, 1},
		{"nothing typed, nothing IPv4", linkLayerEthernet, []gidEntry{
			entry(0, "fe80::1", un),
		}, 0},
		{"empty entries skipped", linkLayerEthernet, []gidEntry{
			entry(0, "::", v2), entry(1, "::ffff:10.0.0.1", v2),
		}, 1},
		{"InfiniBand: the port GID", linkLayerInfiniBand, []gidEntry{
			entry(0, "fe80::2:c903:0:1", gidTypeIB), entry(1, "fe80::2:c903:0:2", gidTypeIB),
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, why, err := chooseGID(tt.table, tt.link)
			require.NoError(t, err)
			require.Equal(t, tt.want, e.index, "chosen index (%s)", why)
			require.NotEmpty(t, why)
		})
	}

	_, _, err := chooseGID([]gidEntry{entry(0, "::", gidTypeRoCEv2)}, linkLayerEthernet)
	require.ErrorIs(t, err, ErrNoDevice, "a port without a GID")
	_, _, err = chooseGID(nil, linkLayerInfiniBand)
	require.ErrorIs(t, err, ErrNoDevice)
}

func TestPickGID(t *testing.T) {
	table := []gidEntry{entry(0, "fe80::1", gidTypeRoCEv1), entry(1, "::", gidTypeRoCEv2), entry(3, "::ffff:10.0.0.1", gidTypeRoCEv2)}
	e, err := pickGID(table, 3)
	require.NoError(t, err)
	require.Equal(t, gidOf("::ffff:10.0.0.1"), e.gid)
	for _, i := range []int{1, 2, 200} {
		_, err := pickGID(table, i)
		require.ErrorIs(t, err, verbs.ErrInvalidArgument, "index %d", i)
		require.Contains(t, err.Error(), "GID index", "index %d", i)
	}
}

func TestGIDFormat(t *testing.T) {
	require.Equal(t, "::ffff:10.0.0.1", formatGID(gidOf("::ffff:10.0.0.1")))
	require.Equal(t, "fe80::1", formatGID(gidOf("fe80::1")))
	require.True(t, isIPv4Mapped(gidOf("::ffff:192.168.1.2")))
	require.False(t, isIPv4Mapped(gidOf("2001:db8::1")))
	require.True(t, isLinkLocal(gidOf("fe80::1")))
	require.False(t, isLinkLocal(gidOf("::ffff:10.0.0.1")))
	require.Equal(t, "RoCEv2", gidTypeName(gidTypeRoCEv2))
	require.Equal(t, "unknown", gidTypeName(gidTypeUnknown))
}

func TestSysfsGIDType(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "mlx5_0", "ports", "1", "gid_attrs", "types")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for name, text := range map[string]string{"0": "IB/RoCE v1\n", "1": "RoCE v2\n", "2": "\n"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	for idx, want := range map[int]int{0: gidTypeRoCEv1, 1: gidTypeRoCEv2, 2: gidTypeUnknown} {
		got, err := sysfsGIDType(root, "mlx5_0", 1, idx)
		require.NoError(t, err, "entry %d", idx)
		require.Equal(t, want, got, "entry %d", idx)
	}
	_, err := sysfsGIDType(root, "mlx5_0", 1, 7)
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = sysfsGIDType(root, "mlx5_0", 2, 0)
	require.ErrorIs(t, err, os.ErrNotExist)
	require.Equal(t, gidTypeIB, parseGIDType("IB"))
}
