package ibv

import (
	"fmt"
	"net/netip"

	"github.com/rdmacell/rdmacell/verbs"
)

// gidTypeUnknown marks a GID entry whose type neither the library nor
// sysfs could tell.
const gidTypeUnknown = -1

// gidEntry is one entry of a port's GID table.
type gidEntry struct {
	index int
	gid   [16]byte
	typ   int    // gidTypeIB, gidTypeRoCEv1, gidTypeRoCEv2 or gidTypeUnknown
	from  string // where typ came from, for the debug log
}

// gidTypeName names a GID type for logs.
func gidTypeName(t int) string {
	switch t {
	case gidTypeIB:
		return "IB"
	case gidTypeRoCEv1:
		return "RoCEv1"
	case gidTypeRoCEv2:
		return "RoCEv2"
	}
	return "unknown"
}

// formatGID writes a GID as an IPv6 address, which is what it is on
// RoCE; an IPv4-mapped GID shows its IPv4 address (::ffff:10.0.0.1).
func formatGID(g [16]byte) string { return netip.AddrFrom16(g).String() }

func isZeroGID(g [16]byte) bool { return g == [16]byte{} }

// isIPv4Mapped reports whether g is ::ffff:a.b.c.d, the GID of an IPv4
// address on RoCE.
func isIPv4Mapped(g [16]byte) bool { return netip.AddrFrom16(g).Is4In6() }

// isLinkLocal reports whether g is in fe80::/10; such a GID is not
// routable, so RoCEv2 traffic using it stays within one L2 segment.
func isLinkLocal(g [16]byte) bool { return netip.AddrFrom16(g).IsLinkLocalUnicast() }

// chooseGID picks the source GID of the QPs of a port from its table and
// says why, for the debug log. On Ethernet it wants RoCEv2, which is
// routed over IP (and hashed by ECMP on its UDP source port): an
// IPv4-mapped entry first, then a global IPv6 one, then a link-local
// one. On InfiniBand it takes entry 0, the port GID.
func chooseGID(table []gidEntry, linkLayer int) (gidEntry, string, error) {
	var usable []gidEntry
	for _, e := range table {
		if !isZeroGID(e.gid) {
			usable = append(usable, e)
		}
	}
	if len(usable) == 0 {
		return gidEntry{}, "", fmt.Errorf("%w: the port's GID table is empty (no IP address on its network interface?)", ErrNoDevice)
	}
	if linkLayer != linkLayerEthernet {
		return usable[0], "InfiniBand port GID", nil
	}
	classes := []struct {
		why string
		ok  func(gidEntry) bool
	}{
		{"RoCEv2, IPv4-mapped", func(e gidEntry) bool { return e.typ == gidTypeRoCEv2 && isIPv4Mapped(e.gid) }},
		{"RoCEv2, global IPv6", func(e gidEntry) bool { return e.typ == gidTypeRoCEv2 && !isLinkLocal(e.gid) }},
		{"RoCEv2, link-local", func(e gidEntry) bool { return e.typ == gidTypeRoCEv2 }},
	}
	for _, c := range classes {
		for _, e := range usable {
			if c.ok(e) {
				return e, c.why, nil
			}
		}
	}
	if e, ok := guessRoCEv2(usable); ok {
		return e, "type unknown: guessed RoCEv2 as the second entry of an IPv4-mapped pair; set " + EnvGIDIndex + " to be sure", nil
	}
	for _, e := range usable {
		if e.typ == gidTypeRoCEv1 {
			return e, "no RoCEv2 entry: RoCEv1 is not routed over IP, both ends must use it", nil
		}
	}
	return usable[0], "no entry of known type: first non-zero entry; set " + EnvGIDIndex + " to be sure", nil
}

// guessRoCEv2 chooses among entries of unknown type. Linux fills a RoCE
// port's table with one RoCEv1 and then one RoCEv2 entry per address, so
// the later of two entries with the same IPv4-mapped GID is the RoCEv2
// one.
func guessRoCEv2(usable []gidEntry) (gidEntry, bool) {
	for i, e := range usable {
		if e.typ != gidTypeUnknown || !isIPv4Mapped(e.gid) {
			continue
		}
		for _, f := range usable[i+1:] {
			if f.typ == gidTypeUnknown && f.gid == e.gid {
				return f, true
			}
		}
		return e, true
	}
	return gidEntry{}, false
}

// pickGID returns the entry at index, which the user chose; it must hold
// a GID.
func pickGID(table []gidEntry, index int) (gidEntry, error) {
	for _, e := range table {
		if e.index == index {
			if isZeroGID(e.gid) {
				break
			}
			return e, nil
		}
	}
	return gidEntry{}, fmt.Errorf("%w: GID index %d holds no GID on this port (%d entries)", verbs.ErrInvalidArgument, index, len(table))
}
