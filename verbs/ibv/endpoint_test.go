package ibv

import (
	"encoding/json"
	"testing"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/stretchr/testify/require"
)

func rocePort() *portInfo {
	return &portInfo{
		portCandidate: portCandidate{device: "mlx5_0", port: 1, state: portActive, linkLayer: linkLayerEthernet},
		mtu:           4096,
		gid:           entry(3, "::ffff:10.0.0.1", gidTypeRoCEv2),
	}
}

func ibPort() *portInfo {
	return &portInfo{
		portCandidate: portCandidate{device: "mlx5_2", port: 1, state: portActive, linkLayer: linkLayerInfiniBand},
		lid:           7,
		mtu:           2048,
		gid:           entry(0, "fe80::2:c903:0:1", gidTypeIB),
	}
}

func TestEndpointEncoding(t *testing.T) {
	ep := endpointOf(rocePort(), "node1", 0x1234, 0xabcdef, 7)
	require.Equal(t, verbs.Endpoint{
		Provider: "ibv", Addr: "mlx5_0:1", QPN: 0x1234, PSN: 0xabcdef, Host: "node1",
		GID: gidOf("::ffff:10.0.0.1"), MTU: 4096, RNRRetry: 7,
	}, ep)

	b, err := json.Marshal(ep)
	require.NoError(t, err)
	var back verbs.Endpoint
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, ep, back, "endpoint after a JSON round trip (%s)", b)

	ib := endpointOf(ibPort(), "node2", 9, 1, 0)
	b, err = json.Marshal(ib)
	require.NoError(t, err)
	back = verbs.Endpoint{}
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, ib, back)
	require.Equal(t, uint16(7), back.LID)
}

func TestPathTo(t *testing.T) {
	peer := endpointOf(rocePort(), "node2", 77, 0x123456, 0)
	peer.GID = gidOf("::ffff:10.0.0.2")
	peer.MTU = 1024

	p, err := pathTo(rocePort(), &peer)
	require.NoError(t, err)
	require.Equal(t, path{mtu: mtu1024, global: true, dgid: peer.GID, qpn: 77, psn: 0x123456, peer: peerKey(peer.GID)}, p,
		"the smaller MTU of both ends, a global route to the peer's GID")

	noMTU := peer
	noMTU.MTU = 0
	p, err = pathTo(rocePort(), &noMTU)
	require.NoError(t, err)
	require.Equal(t, mtu4096, p.mtu, "a peer that offers no MTU takes ours")

	ibPeer := endpointOf(ibPort(), "node3", 5, 1, 0)
	ibPeer.LID = 9
	p, err = pathTo(ibPort(), &ibPeer)
	require.NoError(t, err)
	require.False(t, p.global, "InfiniBand in one subnet routes by LID")
	require.Equal(t, uint16(9), p.dlid)
	require.Equal(t, mtu2048, p.mtu)
	ibPeer.LID = 0
	p, err = pathTo(ibPort(), &ibPeer)
	require.NoError(t, err)
	require.True(t, p.global, "a peer without a LID needs a global route")

	bad := []struct {
		name string
		edit func(*verbs.Endpoint)
	}{
		{"another provider", func(e *verbs.Endpoint) { e.Provider = "tcp" }},
		{"QPN zero", func(e *verbs.Endpoint) { e.QPN = 0 }},
		{"QPN beyond 24 bits", func(e *verbs.Endpoint) { e.QPN = 1 << 24 }},
		{"PSN beyond 24 bits", func(e *verbs.Endpoint) { e.PSN = 1 << 24 }},
		{"MTU not an IB MTU", func(e *verbs.Endpoint) { e.MTU = 1500 }},
		{"no GID on RoCE", func(e *verbs.Endpoint) { e.GID = [16]byte{} }},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			e := peer
			tt.edit(&e)
			_, err := pathTo(rocePort(), &e)
			require.ErrorIs(t, err, verbs.ErrInvalidArgument)
		})
	}
	_, err = pathTo(rocePort(), nil)
	require.ErrorIs(t, err, verbs.ErrInvalidArgument, "no endpoint")
}
