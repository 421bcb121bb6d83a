package netlab

import (
	"context"
	"fmt"
	"strings"
)

// build creates the namespaces, links, addresses, routes and queues of l.
// It stops at the first error; the caller removes what was built.
func build(ctx context.Context, l *Lab) error {
	for _, ns := range l.Namespaces() {
		if _, err := run(ctx, "ip", "netns", "add", ns); err != nil {
			return err
		}
	}
	// Before any link exists, so that the links are born without IPv6 and
	// send nothing the counters of the tests would see.
	if err := setSysctls(ctx, l); err != nil {
		return err
	}
	if err := createLinks(ctx, l); err != nil {
		return err
	}
	if err := addressLinks(ctx, l); err != nil {
		return err
	}
	if err := addRoutes(ctx, l); err != nil {
		return err
	}
	return shapeAll(ctx, l)
}

// setSysctls configures each namespace, inside it: quiet (no IPv6),
// forwarding on the routers without reverse-path filtering (a flow's two
// directions may cross different spines), layer-4 ECMP hashing on the
// leaves, and hosts that never move a connection to another path.
//
// The last needs a word. A packet that crosses veths keeps the flow hash
// its sending socket gave it, and a leaf's layer-4 ECMP uses that hash
// when present rather than hashing the ports again. Linux draws a new
// hash for a connection after a retransmission timeout (net.core.txrehash),
// which would let a TCP connection escape a failed spine by itself — what
// a RoCE queue pair, pinned by its UDP source port, cannot do.
func setSysctls(ctx context.Context, lab *Lab) error {
	c, id := &lab.cfg, lab.id
	quiet := []string{"net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"}
	router := append(quiet, "net.ipv4.ip_forward=1",
		"net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0")
	leaf := append(router[:len(router):len(router)], "net.ipv4.fib_multipath_hash_policy=1")
	host := append(quiet[:len(quiet):len(quiet)], "net.core.txrehash=0")
	if c.Congestion != "" {
		host = append(host, "net.ipv4.tcp_congestion_control="+c.Congestion)
	}
	for h := range c.Hosts {
		if err := sysctl(ctx, id.hostNS(h), host...); err != nil {
			return err
		}
	}
	for l := range 2 {
		if err := sysctl(ctx, id.leafNS(l), leaf...); err != nil {
			return err
		}
	}
	for s := range c.Spines {
		if err := sysctl(ctx, id.spineNS(s), router...); err != nil {
			return err
		}
	}
	return nil
}

// sysctl writes settings inside namespace ns.
func sysctl(ctx context.Context, ns string, settings ...string) error {
	args := append([]string{"netns", "exec", ns, "sysctl", "-q", "-w"}, settings...)
	_, err := run(ctx, "ip", args...)
	return err
}

// readSysctl reads a setting inside namespace ns.
func readSysctl(ctx context.Context, ns, key string) (string, error) {
	out, err := run(ctx, "ip", "netns", "exec", ns, "sysctl", "-n", key)
	return strings.TrimSpace(out), err
}

// createLinks creates every veth pair from the leaves' side, each end
// directly in its namespace.
func createLinks(ctx context.Context, lab *Lab) error {
	c, id := &lab.cfg, lab.id
	for l := range 2 {
		var b batch
		for h := l; h < c.Hosts; h += 2 {
			b.add("link add name", id.leafHostIf(h), "type veth peer name", id.hostIf(), "netns", id.hostNS(h))
		}
		for s := range c.Spines {
			b.add("link add name", id.leafSpineIf(s), "type veth peer name", id.spineLeafIf(l), "netns", id.spineNS(s))
		}
		if err := ipBatch(ctx, id.leafNS(l), &b); err != nil {
			return err
		}
	}
	return nil
}

// addressLinks gives every link its address and brings it up.
func addressLinks(ctx context.Context, lab *Lab) error {
	c, id := &lab.cfg, lab.id
	up := func(b *batch, dev, addr string) {
		b.add("addr add", addr, "dev", dev)
		b.add("link set dev", dev, "up")
	}
	for h := range c.Hosts {
		var b batch
		b.add("link set dev lo up")
		up(&b, id.hostIf(), fmt.Sprintf("%v/24", hostAddr(h)))
		if err := ipBatch(ctx, id.hostNS(h), &b); err != nil {
			return err
		}
	}
	for l := range 2 {
		var b batch
		b.add("link set dev lo up")
		for h := l; h < c.Hosts; h += 2 {
			up(&b, id.leafHostIf(h), fmt.Sprintf("%v/24", hostGateway(h)))
		}
		for s := range c.Spines {
			up(&b, id.leafSpineIf(s), fmt.Sprintf("%v/30", spineLinkLeafAddr(s, l)))
		}
		if err := ipBatch(ctx, id.leafNS(l), &b); err != nil {
			return err
		}
	}
	for s := range c.Spines {
		var b batch
		b.add("link set dev lo up")
		for l := range 2 {
			up(&b, id.spineLeafIf(l), fmt.Sprintf("%v/30", spineLinkSpineAddr(s, l)))
		}
		if err := ipBatch(ctx, id.spineNS(s), &b); err != nil {
			return err
		}
	}
	return nil
}

// addRoutes installs the routes: hosts default to their leaf, each leaf
// reaches the other leaf's hosts over every spine (ECMP), each spine
// reaches each leaf's hosts over its link to that leaf.
func addRoutes(ctx context.Context, lab *Lab) error {
	c, id := &lab.cfg, lab.id
	for h := range c.Hosts {
		var b batch
		route := []string{"route add default via", hostGateway(h).String(), "dev", id.hostIf()}
		if c.RTOMin > 0 {
			route = append(route, "rto_min", fmt.Sprintf("%dms", c.RTOMin.Milliseconds()))
		}
		b.add(route...)
		if err := ipBatch(ctx, id.hostNS(h), &b); err != nil {
			return err
		}
	}
	for l := range 2 {
		hops := []string{"route add", hostPrefix(1 - l).String()}
		for s := range c.Spines {
			hops = append(hops, "nexthop via", spineLinkSpineAddr(s, l).String(), "dev", id.leafSpineIf(s))
		}
		var b batch
		b.add(hops...)
		if err := ipBatch(ctx, id.leafNS(l), &b); err != nil {
			return err
		}
	}
	for s := range c.Spines {
		var b batch
		for l := range 2 {
			b.add("route add", hostPrefix(l).String(), "via", spineLinkLeafAddr(s, l).String(), "dev", id.spineLeafIf(l))
		}
		if err := ipBatch(ctx, id.spineNS(s), &b); err != nil {
			return err
		}
	}
	return nil
}
