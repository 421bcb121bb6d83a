package ibv

import (
	"fmt"
	"log/slog"

	"github.com/rdmacell/rdmacell/verbs"
)

// ProviderName is the provider name of devices and endpoints of this
// package.
const ProviderName = "ibv"

// Options configure Open. Zero values take the documented defaults;
// OptionsFromEnv fills the fields left zero from the environment, so an
// explicit option always wins over a knob.
type Options struct {
	// Device names the RDMA device, as ibv_devices lists it ("mlx5_0").
	// Empty picks the first device with an active port.
	Device string
	// Port is the port number, from 1. Zero picks the first active port
	// of the device.
	Port int
	// GIDIndex selects the entry of the port's GID table that QPs use as
	// their source address. Nil lets Open choose: on Ethernet (RoCE) a
	// RoCEv2 entry, IPv4-mapped preferred; on InfiniBand entry 0. A wrong
	// index is the most common cause of RoCE connections that time out,
	// which is why it can be set here and through the environment.
	GIDIndex *int
	// PathMTU caps the path MTU in bytes (256, 512, 1024, 2048 or 4096).
	// Zero uses the port's active MTU. A QP uses the smaller of its own
	// and its peer's.
	PathMTU int
	// TrafficClass is the GRH traffic class of every QP: on RoCEv2 the
	// IP DSCP (upper six bits) and ECN bits, which decide the switch
	// priority and whether ECN marking (DCQCN) applies.
	TrafficClass uint8
	// HopLimit is the GRH hop limit (IP TTL on RoCEv2); zero means 64.
	HopLimit uint8
	// ServiceLevel is the InfiniBand service level of every QP (on RoCE
	// the driver maps it to a priority).
	ServiceLevel uint8
	// Host identifies the machine in endpoints (default os.Hostname()).
	Host string
	// Logger receives the device choice (at debug level) and failed
	// completions (default slog.Default()).
	Logger *slog.Logger
}

// defaultHopLimit is the hop limit when Options leave it zero; any
// datacenter fabric is far shallower.
const defaultHopLimit = 64

// maxPort is the largest port number ibverbs can address (a uint8).
const maxPort = 255

// validate checks the options after the environment has been applied.
func (o *Options) validate() error {
	if o.Port < 0 || o.Port > maxPort {
		return fmt.Errorf("%w: ibv port %d, want 1..%d (or 0 for the first active port)", verbs.ErrInvalidArgument, o.Port, maxPort)
	}
	if o.GIDIndex != nil && (*o.GIDIndex < 0 || *o.GIDIndex > maxGIDIndex) {
		return fmt.Errorf("%w: ibv GID index %d, want 0..%d", verbs.ErrInvalidArgument, *o.GIDIndex, maxGIDIndex)
	}
	if o.PathMTU != 0 {
		if _, ok := mtuEnum(o.PathMTU); !ok {
			return fmt.Errorf("%w: ibv path MTU %d, want 256, 512, 1024, 2048 or 4096", verbs.ErrInvalidArgument, o.PathMTU)
		}
	}
	if o.HopLimit == 0 {
		o.HopLimit = defaultHopLimit
	}
	return nil
}
