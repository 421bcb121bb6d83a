package netlab

import (
	"fmt"
	"net/netip"
)

// NamePrefix starts the name of every namespace a lab creates; the lab's
// name and a node name follow ("rclab-lab-h0", "rclab-lab-leaf1").
const NamePrefix = "rclab-"

// Interface names inside the namespaces. They never leave the lab's
// namespaces, so they need not be unique on the machine.
const hostIfName = "eth0"

func leafHostIf(h int) string     { return fmt.Sprintf("h%d", h) }
func leafSpineIf(s int) string    { return fmt.Sprintf("s%d", s) }
func spineLeafIf(leaf int) string { return fmt.Sprintf("l%d", leaf) }

// labPrefix is the prefix of the namespaces of the lab called name.
func labPrefix(name string) string { return NamePrefix + name + "-" }

func (c *Config) hostNS(h int) string    { return labPrefix(c.Name) + fmt.Sprintf("h%d", h) }
func (c *Config) leafNS(leaf int) string { return labPrefix(c.Name) + fmt.Sprintf("leaf%d", leaf) }
func (c *Config) spineNS(s int) string   { return labPrefix(c.Name) + fmt.Sprintf("s%d", s) }

// namespaces lists every namespace of the lab, hosts first.
func (c *Config) namespaces() []string {
	var ns []string
	for h := range c.Hosts {
		ns = append(ns, c.hostNS(h))
	}
	for leaf := range 2 {
		ns = append(ns, c.leafNS(leaf))
	}
	for s := range c.Spines {
		ns = append(ns, c.spineNS(s))
	}
	return ns
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
