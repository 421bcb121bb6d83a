package ibv

import (
	"fmt"

	"github.com/rdmacell/rdmacell/verbs"
)

// endpointOf is the connection information of a QP numbered qpn with
// initial send PSN psn on port p. Addr names the device and port for
// people reading logs; peers connect by GID (or LID), QPN and PSN.
func endpointOf(p *portInfo, host string, qpn, psn uint32, rnrRetry uint8) verbs.Endpoint {
	return verbs.Endpoint{
		Provider: ProviderName,
		Addr:     p.device + ":" + fmt.Sprint(p.port),
		QPN:      qpn,
		PSN:      psn,
		Host:     host,
		GID:      p.gid.gid,
		LID:      p.lid,
		MTU:      uint32(p.mtu),
		RNRRetry: rnrRetry,
	}
}

// psnMask keeps the 24 bits of a packet sequence number.
const psnMask = 1<<24 - 1

// path is what ibv_modify_qp needs to reach a peer, derived from its
// endpoint.
type path struct {
	mtu    int // enum ibv_mtu
	global bool
	dgid   [16]byte
	dlid   uint16
	qpn    uint32
	psn    uint32
	peer   peerKey
}

// pathTo checks the peer's endpoint as seen from port p and derives the
// path to it. The path MTU is the smaller of both ends' offers, so that
// neither sends a packet the other cannot take.
func pathTo(p *portInfo, remote *verbs.Endpoint) (path, error) {
	if remote == nil {
		return path{}, fmt.Errorf("%w: moving to RTR needs the peer's endpoint", verbs.ErrInvalidArgument)
	}
	if remote.Provider != ProviderName {
		return path{}, fmt.Errorf("%w: endpoint of provider %q, want %q", verbs.ErrInvalidArgument, remote.Provider, ProviderName)
	}
	if remote.QPN == 0 || remote.QPN > 1<<24-1 {
		return path{}, fmt.Errorf("%w: endpoint QPN %d, want 1..%d", verbs.ErrInvalidArgument, remote.QPN, 1<<24-1)
	}
	if remote.PSN > psnMask {
		return path{}, fmt.Errorf("%w: endpoint PSN %#x, want 24 bits", verbs.ErrInvalidArgument, remote.PSN)
	}
	mtu := p.mtu
	if remote.MTU != 0 {
		if _, ok := mtuEnum(int(remote.MTU)); !ok {
			return path{}, fmt.Errorf("%w: endpoint MTU %d, want 256, 512, 1024, 2048 or 4096", verbs.ErrInvalidArgument, remote.MTU)
		}
		mtu = min(mtu, int(remote.MTU))
	}
	e, _ := mtuEnum(mtu)
	pa := path{mtu: e, global: p.global(remote.LID), dgid: remote.GID, dlid: remote.LID, qpn: remote.QPN, psn: remote.PSN}
	switch {
	case pa.global && isZeroGID(remote.GID):
		return path{}, fmt.Errorf("%w: endpoint of QP %d has no GID, which a %s port needs", verbs.ErrInvalidArgument, remote.QPN, linkLayerName(p.linkLayer))
	case pa.global:
		pa.peer = peerKey(remote.GID)
	default:
		pa.peer[0], pa.peer[1] = byte(remote.LID>>8), byte(remote.LID)
	}
	return pa, nil
}
