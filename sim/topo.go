package sim

import (
	"fmt"
	"math"
)

// Topology names a fabric shape: "fattree" (K pods of K/2 ToRs and K/2
// aggregation switches, (K/2)² cores, K³/4 hosts, no oversubscription) or
// "leafspine" (Leaves ToRs of HostsPerLeaf hosts, each linked to every one
// of Spines spines).
type Topology struct {
	Kind                         string
	K                            int
	Leaves, Spines, HostsPerLeaf int
}

// port is one direction of a link: an egress queue at node, leading to
// peer's port peerPort.
type port struct {
	node, peer, peerPort int32
	psPerByte            int64 // serialization, picoseconds per byte
	delay                int64 // propagation, ns
	rem                  int64 // picoseconds carried to the next packet
	// busyUntil is when the packet on the wire is out; txPending says
	// an evTxDone is queued for then (only when there is more to send),
	// txSeq the sequence number reserved for it when the packet started.
	busyUntil  int64
	txPending  bool
	txSeq      uint64
	up         bool // leads to a switch of a higher tier
	ctrl, data ring[qent]
	qbytes     int64 // data bytes queued here
	// dre is CONGA's discounting rate estimator, util HULA's link
	// utilization; both decayed lazily from their timestamps.
	dre, util   float64
	dreT, utilT int64
	txBytes     int64
	maxQ        int64
	// PFC. As an ingress port (packets arriving by this port's link,
	// the port itself leading back to their sender): data bytes buffered
	// here in the shared part and in the headroom, and whether the
	// sender is paused. As an egress port: paused by its peer, since.
	inBytes, inHdrm int64
	xoff, paused    bool
	pausedAt        int64
	pfcOut          int8 // a PFC frame to send first (pfcNone, pfcPauseOut, pfcResumeOut)
}

// node is a host or a switch.
type node struct {
	ports []int32
	tier  int8 // 0 host, 1 ToR/leaf, 2 aggregation, 3 core/spine
	tor   int32
	seed  uint32
	used  int64 // shared buffer bytes in use (switches)
}

// fabric is the built topology with its routing tables.
type fabric struct {
	nodes []node
	ports []port
	hosts int
	tors  []int32 // switch ids of the ToRs
	torIx []int32 // node id → ToR index, or -1
	// nh[s*len(tors)+t] is the slice of nhPorts holding switch s's
	// next hops toward ToR t (s counted from the first switch).
	nh       []span
	nhPorts  []int32
	dist     [][]int32 // dist[t][node]: switch hops from ToR t
	hostPort []int32   // the ToR port facing each host
}

type span struct{ off, n int32 }

func (f *fabric) addNode(tier int8) int32 {
	f.nodes = append(f.nodes, node{tier: tier, tor: -1})
	return int32(len(f.nodes) - 1)
}

func (f *fabric) link(a, b int32, psPerByte, delay int64) {
	pa, pb := int32(len(f.ports)), int32(len(f.ports)+1)
	f.ports = append(f.ports,
		port{node: a, peer: b, peerPort: pb, psPerByte: psPerByte, delay: delay, up: f.nodes[b].tier > f.nodes[a].tier, busyUntil: -1},
		port{node: b, peer: a, peerPort: pa, psPerByte: psPerByte, delay: delay, up: f.nodes[a].tier > f.nodes[b].tier, busyUntil: -1})
	f.nodes[a].ports = append(f.nodes[a].ports, pa)
	f.nodes[b].ports = append(f.nodes[b].ports, pb)
}

// buildFabric lays out the topology: hosts first (ids 0..hosts-1), then
// switches.
func buildFabric(t Topology, gbps float64, delay int64) (*fabric, error) {
	ps := int64(8000/gbps + 0.5)
	f := &fabric{}
	var tors []int32
	switch t.Kind {
	case "fattree", "":
		k := t.K
		if k < 2 || k%2 != 0 {
			return nil, fmt.Errorf("fat-tree K = %d, want an even number >= 2", k)
		}
		h := k / 2
		f.hosts = k * k * k / 4
		for range f.hosts {
			f.addNode(0)
		}
		aggs := make([]int32, k*h)
		for p := range k {
			for i := range h {
				tors = append(tors, f.addNode(1))
				aggs[p*h+i] = f.addNode(2)
			}
		}
		cores := make([]int32, h*h)
		for i := range cores {
			cores[i] = f.addNode(3)
		}
		for ti, tor := range tors {
			for j := range h {
				f.link(int32(ti*h+j), tor, ps, delay)
			}
			p := ti / h
			for j := range h {
				f.link(tor, aggs[p*h+j], ps, delay)
			}
		}
		for p := range k {
			for j := range h {
				for c := range h {
					f.link(aggs[p*h+j], cores[j*h+c], ps, delay)
				}
			}
		}
	case "leafspine":
		if t.Leaves < 1 || t.Spines < 1 || t.HostsPerLeaf < 1 {
			return nil, fmt.Errorf("leaf-spine %d leaves, %d spines, %d hosts per leaf: want all >= 1", t.Leaves, t.Spines, t.HostsPerLeaf)
		}
		f.hosts = t.Leaves * t.HostsPerLeaf
		for range f.hosts {
			f.addNode(0)
		}
		for range t.Leaves {
			tors = append(tors, f.addNode(1))
		}
		spines := make([]int32, t.Spines)
		for i := range spines {
			spines[i] = f.addNode(3)
		}
		for li, leaf := range tors {
			for j := range t.HostsPerLeaf {
				f.link(int32(li*t.HostsPerLeaf+j), leaf, ps, delay)
			}
			for _, s := range spines {
				f.link(leaf, s, ps, delay)
			}
		}
	default:
		return nil, fmt.Errorf("topology %q, want fattree or leafspine", t.Kind)
	}
	if len(f.nodes) > math.MaxInt16 {
		// Packets name switches (and paths, fewer) in 16 bits.
		return nil, fmt.Errorf("%d nodes, at most %d", len(f.nodes), math.MaxInt16)
	}
	f.tors = tors
	f.route()
	return f, nil
}

// route fills the next-hop tables by breadth-first search from each ToR.
func (f *fabric) route() {
	n := int32(len(f.nodes))
	f.torIx = make([]int32, n)
	for i := range f.torIx {
		f.torIx[i] = -1
	}
	for i, t := range f.tors {
		f.torIx[t] = int32(i)
	}
	f.hostPort = make([]int32, f.hosts)
	for h := int32(0); h < int32(f.hosts); h++ {
		p := f.ports[f.nodes[h].ports[0]]
		f.nodes[h].tor = p.peer
		f.hostPort[h] = p.peerPort
	}
	for i := int32(f.hosts); i < n; i++ {
		f.nodes[i].seed = uint32(i)*0x9E3779B1 + 1
	}
	T := len(f.tors)
	f.dist = make([][]int32, T)
	for ti, t := range f.tors {
		d := make([]int32, n)
		for i := range d {
			d[i] = -1
		}
		d[t] = 0
		q := []int32{t}
		for len(q) > 0 {
			x := q[0]
			q = q[1:]
			for _, pi := range f.nodes[x].ports {
				y := f.ports[pi].peer
				if f.nodes[y].tier == 0 || d[y] >= 0 {
					continue
				}
				d[y] = d[x] + 1
				q = append(q, y)
			}
		}
		f.dist[ti] = d
	}
	sw := int(n) - f.hosts
	f.nh = make([]span, sw*T)
	for s := int32(f.hosts); s < n; s++ {
		for ti := range f.tors {
			d := f.dist[ti]
			off := int32(len(f.nhPorts))
			for _, pi := range f.nodes[s].ports {
				y := f.ports[pi].peer
				if f.nodes[y].tier != 0 && d[y] == d[s]-1 {
					f.nhPorts = append(f.nhPorts, pi)
				}
			}
			f.nh[int(s-int32(f.hosts))*T+ti] = span{off, int32(len(f.nhPorts)) - off}
		}
	}
}

// next returns switch s's next-hop ports toward ToR index t.
func (f *fabric) next(s int32, t int32) []int32 {
	sp := f.nh[int(s-int32(f.hosts))*len(f.tors)+int(t)]
	return f.nhPorts[sp.off : sp.off+sp.n]
}

// paths is the number of distinct up-down routes from ToR index a to b:
// the product of the choices along the way.
func (f *fabric) paths(a, b int32) int32 {
	n := int32(1)
	s := f.tors[a]
	for s != f.tors[b] {
		hops := f.next(s, b)
		n *= int32(len(hops))
		s = f.ports[hops[0]].peer
	}
	return n
}

// hops is the number of links between two hosts.
func (f *fabric) hops(a, b int32) int {
	ta, tb := f.nodes[a].tor, f.nodes[b].tor
	return int(f.dist[f.torIx[tb]][ta]) + 2
}

// diameter is the most links between two hosts.
func (f *fabric) diameter() int {
	most := int32(0)
	for ti := range f.tors {
		for _, t := range f.tors {
			most = max(most, f.dist[ti][t])
		}
	}
	return int(most) + 2
}
