package netlab

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"strings"
)

// NamePrefix starts the name of every namespace a lab creates.
const NamePrefix = "rclab-"

// labID names one lab instance. Its namespaces are called
//
//	rclab-<name>-<tag>-<owner>-<node>   e.g. rclab-failover-k3x9qa-4711-leaf0
//
// name is Config.Name, for people; tag is drawn at random for each lab,
// so that labs of the same name are told apart, and so are their
// interfaces; owner is the pid of the process that owns the lab and takes
// it down, 0 for a detached lab (UpDetached), which nobody owns. The
// owner is in the name, not in a file beside it, so that it exists as
// soon as the lab's first namespace does: a lab being built is never
// mistaken for the leftover of a crash (see reapLeftovers).
type labID struct {
	name  string
	tag   string
	owner int
}

// tagLen is the length of a tag: short, so that interface names fit in
// IFNAMSIZ, and one of 36^6, so that two labs seldom draw the same. Only
// labs of one process could then share a namespace name (the owner pid
// tells the others apart), and Up draws again for those.
const tagLen = 6

// ifNameMax is the longest interface name Linux takes (IFNAMSIZ less the
// terminating NUL).
const ifNameMax = 15

const tagAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// newTag draws a tag.
func newTag() string {
	b := make([]byte, tagLen)
	for i := range b {
		b[i] = tagAlphabet[rand.IntN(len(tagAlphabet))]
	}
	return string(b)
}

// String is the lab's ID, as Lab.ID returns it.
func (id labID) String() string { return id.name + "-" + id.tag }

// prefix starts the name of each of the lab's namespaces.
func (id labID) prefix() string {
	return NamePrefix + id.name + "-" + id.tag + "-" + strconv.Itoa(id.owner) + "-"
}

func (id labID) hostNS(h int) string    { return id.prefix() + "h" + strconv.Itoa(h) }
func (id labID) leafNS(leaf int) string { return id.prefix() + "leaf" + strconv.Itoa(leaf) }
func (id labID) spineNS(s int) string   { return id.prefix() + "s" + strconv.Itoa(s) }

// Interface names. Every link is created inside the lab's namespaces and
// never passes through the machine's own, so plain names could not
// collide; they carry the tag all the same, so that a link that ever
// showed up outside the lab would name its lab, and never clash with the
// machine's interfaces or another lab's. The longest, with MaxHosts, is
// "k3x9qa-h63", well within ifNameMax.
func (id labID) hostIf() string              { return id.tag + "-e0" }
func (id labID) leafHostIf(h int) string     { return id.tag + "-h" + strconv.Itoa(h) }
func (id labID) leafSpineIf(s int) string    { return id.tag + "-s" + strconv.Itoa(s) }
func (id labID) spineLeafIf(leaf int) string { return id.tag + "-l" + strconv.Itoa(leaf) }

// namespaces lists every namespace of a lab of hosts hosts and spines
// spines, hosts first.
func (id labID) namespaces(hosts, spines int) []string {
	var ns []string
	for h := range hosts {
		ns = append(ns, id.hostNS(h))
	}
	for leaf := range 2 {
		ns = append(ns, id.leafNS(leaf))
	}
	for s := range spines {
		ns = append(ns, id.spineNS(s))
	}
	return ns
}

// parseNamespace splits the name of a lab's namespace into the lab and
// the node; ok is false for any other namespace.
func parseNamespace(ns string) (id labID, node string, ok bool) {
	rest, ok := strings.CutPrefix(ns, NamePrefix)
	if !ok {
		return labID{}, "", false
	}
	f := strings.Split(rest, "-")
	if len(f) != 4 || !namePattern.MatchString(f[0]) || len(f[1]) != tagLen || f[3] == "" {
		return labID{}, "", false
	}
	owner, err := strconv.Atoi(f[2])
	if err != nil || owner < 0 || strconv.Itoa(owner) != f[2] {
		return labID{}, "", false
	}
	return labID{name: f[0], tag: f[1], owner: owner}, f[3], true
}

// matches says whether query, a lab's name or ID, names this lab; ""
// names every lab.
func (id labID) matches(query string) bool {
	return query == "" || query == id.name || query == id.String()
}

// checkQuery refuses what can be neither a lab's name nor its ID.
func checkQuery(query string) error {
	name, tag, hasTag := strings.Cut(query, "-")
	if !namePattern.MatchString(name) || hasTag && len(tag) != tagLen {
		return fmt.Errorf("%w: lab %q: want a lab's name (1 to 12 lower-case letters and digits) or its ID (name-tag)", ErrConfig, query)
	}
	return nil
}

// leafOf is the leaf host h hangs off: alternate leaves, so that hosts
// next to each other in rank order talk across the spines.
func leafOf(h int) int { return h % 2 }

// hostPrefix is the prefix of the hosts of a leaf.
func hostPrefix(leaf int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(100 + leaf), 0, 0}), 16)
}

// hostAddr and hostGateway are the two ends of host h's link.
func hostAddr(h int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, byte(100 + leafOf(h)), byte(h), 2})
}

func hostGateway(h int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, byte(100 + leafOf(h)), byte(h), 1})
}

// spineLinkLeafAddr and spineLinkSpineAddr are the two ends of the link
// between a leaf and spine s, a /30.
func spineLinkLeafAddr(s, leaf int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 200, byte(s), byte(4*leaf + 1)})
}

func spineLinkSpineAddr(s, leaf int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 200, byte(s), byte(4*leaf + 2)})
}
