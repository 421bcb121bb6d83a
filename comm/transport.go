package comm

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/rdmacell/rdmacell/verbs/ibv"
	"github.com/rdmacell/rdmacell/verbs/shm"
	"github.com/rdmacell/rdmacell/verbs/tcp"
)

// Transport names the verbs provider a rank reaches its peers through.
type Transport string

// Transports.
const (
	// TransportAuto reaches ranks of this host over shared memory and the
	// others over TCP.
	TransportAuto Transport = "auto"
	// TransportShm is shared memory (verbs/shm), for ranks of one host.
	TransportShm Transport = "shm"
	// TransportTCP is TCP (verbs/tcp), authenticated with the job secret.
	TransportTCP Transport = "tcp"
	// TransportIBV is an RDMA NIC through libibverbs (verbs/ibv), in a
	// binary built with the ibverbs tag.
	TransportIBV Transport = "ibv"
)

// String returns the transport's name.
func (t Transport) String() string { return string(t) }

// transportWant says which transports there are, for errors.
const transportWant = "auto, shm, tcp or ibv"

// ParseTransport returns the transport named s.
func ParseTransport(s string) (Transport, error) {
	switch t := Transport(s); t {
	case TransportAuto, TransportShm, TransportTCP, TransportIBV:
		return t, nil
	}
	return "", fmt.Errorf("%w: transport %q, want %s", ErrInvalidArgument, s, transportWant)
}

// Devices of a communicator, by index: the protocol names a buffer's keys
// by the device of the peer's links.
const (
	devShm = iota
	devTCP
	devIBV
	numDevices
)

// provider opens the device of one transport.
type provider struct {
	transport Transport
	open      func(w *world) (verbs.Device, error)
}

// providers are the transports a communicator can open, by device index.
var providers = [numDevices]provider{
	devShm: {transport: TransportShm, open: openShm},
	devTCP: {transport: TransportTCP, open: openTCP},
	devIBV: {transport: TransportIBV, open: openIBV},
}

// device indexes providers.
type device int

func (d device) String() string { return string(providers[d].transport) }

func openShm(w *world) (verbs.Device, error) {
	return shm.Open(shm.Options{Host: w.host})
}

func openTCP(w *world) (verbs.Device, error) {
	addr := "127.0.0.1:0"
	for _, p := range w.peers {
		if p.host != w.host {
			addr = ":0" // some peer is elsewhere: listen where it can reach
			break
		}
	}
	if w.opts.TCPAddr != "" {
		addr, _ = tcpListenAddr(w.opts.TCPAddr)
	}
	secret := w.job.Secret()
	if w.opts.tcpSecret != nil {
		secret = w.opts.tcpSecret
	}
	// A wildcard listen address is advertised under the machine's own
	// name, which peers can resolve; Options.Host may be a name that only
	// groups ranks (several per machine in tests and benchmarks).
	return tcp.Open(tcp.Options{ListenAddr: addr, Secret: secret, Logger: w.logger("tcp")})
}

func openIBV(w *world) (verbs.Device, error) {
	o := w.opts.IBV
	if o.Logger == nil {
		o.Logger = w.logger("ibv")
	}
	d, err := ibv.Open(o)
	if errors.Is(err, ibv.ErrNotBuilt) {
		return nil, &OptionError{Field: "Transport", Value: strconv.Quote(string(TransportIBV)),
			Want: "a binary built with the ibverbs tag (go build -tags ibverbs, with cgo and libibverbs-dev), or auto, shm or tcp"}
	}
	return d, err
}

// pick returns the device through which this rank reaches p.
func (w *world) pick(p *peer) (device, error) {
	switch w.opts.Transport {
	case TransportShm:
		if p.host != w.host {
			return 0, fmt.Errorf("rank %d is on host %q, this rank on %q", p.rank, p.host, w.host)
		}
		return devShm, nil
	case TransportTCP:
		return devTCP, nil
	case TransportIBV:
		return devIBV, nil
	}
	if p.host == w.host {
		return devShm, nil
	}
	return devTCP, nil
}
