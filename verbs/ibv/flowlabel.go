package ibv

import "sync"

// flowLabelMask keeps the 20 bits of a GRH flow label.
const flowLabelMask = 0xFFFFF

// udpSportBase is the lowest UDP source port RoCEv2 uses for flow
// entropy: the top two bits of every such port are set.
const udpSportBase = 0xC000

// udpSportBits is how many bits of entropy a RoCEv2 source port carries.
const udpSportBits = 14

// FlowLabel returns the GRH flow label this package derives for the QP
// pair with numbers a and b. It is symmetric, so both ends of the pair
// compute the same label, never zero (zero asks the driver to derive its
// own), and well mixed, so that QPs created one after another get
// unrelated labels and hence unrelated RoCEv2 UDP source ports.
func FlowLabel(a, b uint32) uint32 {
	lo, hi := min(a, b), max(a, b)
	x := uint64(hi)<<32 | uint64(lo)
	// The splitmix64 finaliser: every input bit affects every output bit.
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	fl := uint32(x) & flowLabelMask
	if fl == 0 {
		fl = 1
	}
	return fl
}

// UDPSourcePort returns the RoCEv2 UDP source port that Linux RDMA
// drivers (mlx5, irdma, rxe) put on the packets of a QP whose GRH flow
// label is fl: the upper 6 of the label's 20 bits are folded onto the
// lower 14 by XOR and the result is placed above udpSportBase. Only 14
// bits survive, so distinct labels can share a port; flowLabels keeps the
// ports of one peer's paths distinct, not just their labels.
func UDPSourcePort(fl uint32) uint16 {
	fl &= flowLabelMask
	low := fl & (1<<udpSportBits - 1)
	low ^= fl >> udpSportBits
	return uint16(low | udpSportBase)
}

// peerKey names the remote port of a path: its GID, or its LID on
// InfiniBand without a global route header.
type peerKey [16]byte

// flowLabels hands out the flow labels of one device's QPs so that the
// paths towards one peer port get distinct UDP source ports, hence
// (with ECMP hashing on the 5-tuple) a fair chance of distinct routes.
type flowLabels struct {
	mu   sync.Mutex
	used map[peerKey]map[uint16]int // peer → source port → QPs on it
}

// assign returns the flow label of a QP numbered lqpn connecting to rqpn
// at peer. A fixed label (QPConfig.FlowLabel) is used as given. Otherwise
// the label is FlowLabel(lqpn, rqpn), which the peer derives too, unless
// its source port is already taken towards peer; then the lower 14 bits
// are stepped until a free port is found. Only in that case do the two
// ends use different labels, which is harmless: each end's label steers
// only the packets it sends.
func (f *flowLabels) assign(peer peerKey, lqpn, rqpn, fixed uint32) uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.used == nil {
		f.used = make(map[peerKey]map[uint16]int)
	}
	ports := f.used[peer]
	if ports == nil {
		ports = make(map[uint16]int)
		f.used[peer] = ports
	}
	fl := fixed & flowLabelMask
	if fl == 0 {
		fl = FlowLabel(lqpn, rqpn)
		const lowMask = 1<<udpSportBits - 1
		for range 1 << udpSportBits {
			if ports[UDPSourcePort(fl)] == 0 && fl != 0 {
				break
			}
			// Stepping the lower bits with the upper ones fixed visits
			// every source port once.
			fl = fl&^lowMask | (fl+1)&lowMask
		}
		if fl == 0 { // every port in use: more paths than ports
			fl = FlowLabel(lqpn, rqpn)
		}
	}
	ports[UDPSourcePort(fl)]++
	return fl
}

// release returns the label a QP was assigned towards peer.
func (f *flowLabels) release(peer peerKey, fl uint32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ports := f.used[peer]
	sp := UDPSourcePort(fl)
	if ports[sp] <= 1 {
		delete(ports, sp)
		if len(ports) == 0 {
			delete(f.used, peer)
		}
		return
	}
	ports[sp]--
}
