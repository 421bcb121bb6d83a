// Package netlab builds a leaf-spine fabric out of Linux network namespaces
// on one machine, so that RDMACell's multipath placement and recovery can
// be measured on real kernel networking: real TCP, real ECMP hashing, real
// queues and real link failures.
//
// # Topology
//
// A lab of H hosts and S spines has H+2+S namespaces: hosts h0..h(H-1),
// leaves leaf0 and leaf1, and spines s0..s(S-1). Host h hangs off leaf
// h%2, so that consecutive hosts (and ring neighbours) talk across the
// spines. Every leaf has one veth to every spine. The leaves and spines
// forward; the leaves route the other leaf's hosts over an ECMP route
// with one next hop per spine and hash on the layer-4 five-tuple
// (net.ipv4.fib_multipath_hash_policy=1, set inside each leaf's
// namespace: the sysctl is per namespace). Each TCP connection, hence each
// queue pair of the tcp provider, is thereby pinned to one spine, as a
// RoCEv2 queue pair is by its UDP source port. (On veths the leaves hash
// the flow hash the sending socket chose, a random value per connection;
// the hosts are told never to draw a new one after a timeout, with
// net.core.txrehash=0, so that a connection stays on its spine.)
//
// Addresses are private and exist only inside the lab's namespaces:
// hosts of leaf L live in 10.(100+L).0.0/16 (host h is 10.(100+L).h.2, its
// leaf 10.(100+L).h.1), and the link between leaf L and spine s is
// 10.200.s.(4L)/30 (leaf .4L+1, spine .4L+2). The machine's own
// interfaces, routes and sysctls are never touched: every link is created
// directly inside its namespaces, and every sysctl is written inside one.
//
// # Rates and faults
//
// Spine links (both directions) and, optionally, host links are shaped
// with tbf, so that the fabric, not the CPU, is the bottleneck. While
// traffic runs a spine link can be slowed to a fraction of its rate
// (SetRate), taken down on one side (LinkDown: the leaf on that side stops
// using the spine, while the other leaf keeps hashing flows into it, which
// the spine then drops — a gray failure), or made to flap (Flap). Like any
// router, the spine answers what it cannot deliver with ICMP unreachables
// (rate-limited): a new connection hashed there fails at once, while an
// established one, for which TCP takes them as soft errors, just stalls.
//
// # Names and cleanup
//
// Any number of labs can be up at once, in one process or several (go
// test runs packages in parallel): nothing a lab creates shares a name
// with another lab's. Each lab has an ID, its name and a random tag
// ("failover-k3x9qa"), and an owner, the process that built it. Its
// namespaces are named NamePrefix + name-tag-owner-node
// ("rclab-failover-k3x9qa-4711-leaf0"), its interfaces tag-role
// ("k3x9qa-s2"); addresses and routes exist only inside its namespaces.
//
// Removal goes by the lab, never by a prefix alone. Down removes the
// lab's own namespaces, killing the processes still running inside, and
// touches nothing else; so does the removal of what a failed Up built.
// HandleSignals takes every lab of the process down on SIGINT or SIGTERM
// before it exits; the package's tests take theirs down on failure and
// panic as well. A process killed outright leaves its lab behind: Up
// removes such leftovers, the labs whose owner no longer runs, and never
// a lab whose owner still does. A detached lab (UpDetached, `netlab up`)
// has no owner and stays until Cleanup (`netlab down`) removes it.
//
// Building needs root; Supported says whether this process can.
package netlab
