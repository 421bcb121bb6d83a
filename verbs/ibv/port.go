package ibv

import (
	"fmt"
	"strconv"
	"strings"
)

// portCandidate is one port of one device, as Open found it.
type portCandidate struct {
	device    string
	port      int
	state     int // enum ibv_port_state
	linkLayer int
}

// String describes the port as error messages list it.
func (c portCandidate) String() string {
	return c.device + " port " + strconv.Itoa(c.port) + " " + portStateName(c.state) + " (" + linkLayerName(c.linkLayer) + ")"
}

// choosePort picks the port Open uses: the named device and port when
// given, the first active port of the named device, or the first active
// port of any device. The error lists every port seen, so that a job that
// cannot start says what the machine has.
func choosePort(cands []portCandidate, device string, port int) (portCandidate, error) {
	for _, c := range cands {
		if (device == "" || c.device == device) && (port == 0 || c.port == port) && c.state == portActive {
			return c, nil
		}
	}
	want := "any device"
	if device != "" {
		want = "device " + strconv.Quote(device)
	}
	if port != 0 {
		want += " port " + strconv.Itoa(port)
	}
	if len(cands) == 0 {
		return portCandidate{}, fmt.Errorf("%w: wanted %s, found no RDMA device", ErrNoDevice, want)
	}
	seen := make([]string, len(cands))
	for i, c := range cands {
		seen[i] = c.String()
	}
	return portCandidate{}, fmt.Errorf("%w: wanted %s, found %s", ErrNoDevice, want, strings.Join(seen, ", "))
}

// portInfo is what QPs need to know about the port their device opened.
type portInfo struct {
	portCandidate
	lid uint16
	// mtu is the MTU in bytes this side offers its peers: the port's
	// active MTU, capped by Options.PathMTU.
	mtu int
	gid gidEntry
}

// global reports whether paths from this port need a global route header:
// always on Ethernet (RoCE addresses by GID), on InfiniBand only towards a
// peer without a LID (in another subnet).
func (p *portInfo) global(remoteLID uint16) bool {
	return p.linkLayer == linkLayerEthernet || remoteLID == 0
}

func portStateName(s int) string {
	names := [...]string{"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"}
	if s >= 0 && s < len(names) {
		return names[s]
	}
	return "state " + strconv.Itoa(s)
}

func linkLayerName(l int) string {
	switch l {
	case linkLayerInfiniBand:
		return "InfiniBand"
	case linkLayerEthernet:
		return "Ethernet"
	}
	// Old drivers report unspecified for InfiniBand ports.
	return "InfiniBand (unspecified)"
}
