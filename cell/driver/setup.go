package driver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/rdmacell/rdmacell/verbs"
)

// Exchanger swaps the two ends' setup information once, out of band. The
// communicator implements it over the bootstrap's key-value store; both
// ends call Exchange exactly once, with their own information, and get
// the other's. The bytes are opaque to it.
type Exchanger interface {
	Exchange(ctx context.Context, local []byte) (remote []byte, err error)
}

// A Confirmer is an Exchanger that can also tell the peer that this end's
// QPs are connected and wait for the peer's word that its are. Dial
// confirms, where its Exchanger can, between connecting the QPs and
// probing them: a probe sent before the peer connected waits for it only
// as long as the QP's retry budget (Timeout × (RetryCount+1), 4 s by
// default), and on a loaded machine the peer may take longer to get
// this end's setup; the confirmation waits as long as Dial's context.
type Confirmer interface {
	Exchanger
	Confirm(ctx context.Context) error
}

// ExchangeFunc adapts a function to Exchanger.
type ExchangeFunc func(ctx context.Context, local []byte) ([]byte, error)

// Exchange calls f.
func (f ExchangeFunc) Exchange(ctx context.Context, local []byte) ([]byte, error) {
	return f(ctx, local)
}

// setupVersion numbers the layout of setupInfo and of the rings.
const setupVersion = 3

// maxSetupLen bounds the peer's setup information before it is decoded.
const maxSetupLen = 1 << 20

// maxAddrLen bounds the strings of an endpoint.
const maxAddrLen = 256

// setupInfo is what one end tells the other before connecting.
type setupInfo struct {
	Version int              `json:"version"`
	Wire    wireParams       `json:"wire"`
	Paths   []verbs.Endpoint `json:"paths"`
	Lanes   []verbs.Endpoint `json:"lanes"` // of the control channel
	Rings   ringInfo         `json:"rings"`
}

// wireParams are the parameters both ends must share.
type wireParams struct {
	Provider    string `json:"provider"`
	Paths       int    `json:"paths"`
	MTU         int    `json:"mtu"`
	Window      int    `json:"window"`
	MaxRanges   int    `json:"max_ranges"`
	RecvDepth   int    `json:"recv_depth"`
	FirstCellID uint32 `json:"first_cell_id"`
}

// ringInfo names the region holding an end's rings.
type ringInfo struct {
	Addr uint64 `json:"addr"`
	RKey uint32 `json:"rkey"`
	Len  int    `json:"len"`
}

func (s *setupInfo) encode() ([]byte, error) { return json.Marshal(s) }

// parseSetup decodes and checks the peer's setup information against this
// end's own.
func parseSetup(peer string, b []byte, local *setupInfo) (*setupInfo, error) {
	bad := func(field, format string, args ...any) error {
		return &SetupError{Peer: peer, Field: field, Detail: fmt.Sprintf(format, args...)}
	}
	if len(b) == 0 || len(b) > maxSetupLen {
		return nil, bad("(all)", "%d bytes, want 1..%d", len(b), maxSetupLen)
	}
	var r setupInfo
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, &SetupError{Peer: peer, Field: "(all)", Detail: "not a setup record", Err: err}
	}
	if r.Version != setupVersion {
		return nil, bad("version", "%d, want %d", r.Version, setupVersion)
	}
	lw, rw := local.Wire, r.Wire
	for _, f := range []struct {
		name      string
		got, want any
	}{
		{"wire.provider", rw.Provider, lw.Provider},
		{"wire.paths", rw.Paths, lw.Paths},
		{"wire.mtu", rw.MTU, lw.MTU},
		{"wire.window", rw.Window, lw.Window},
		{"wire.max_ranges", rw.MaxRanges, lw.MaxRanges},
		{"wire.recv_depth", rw.RecvDepth, lw.RecvDepth},
		{"wire.first_cell_id", rw.FirstCellID, lw.FirstCellID},
	} {
		if f.got != f.want {
			return nil, bad(f.name, "%#v, want %#v (the ends must agree)", f.got, f.want)
		}
	}
	if len(r.Paths) != lw.Paths {
		return nil, bad("paths", "%d endpoints, want %d", len(r.Paths), lw.Paths)
	}
	for i := range r.Paths {
		if err := checkEndpoint(&r.Paths[i], lw.Provider); err != "" {
			return nil, bad(fmt.Sprintf("paths[%d]", i), "%s", err)
		}
	}
	if n := laneCount(lw.Paths); len(r.Lanes) != n {
		return nil, bad("lanes", "%d endpoints, want %d", len(r.Lanes), n)
	}
	for i := range r.Lanes {
		if err := checkEndpoint(&r.Lanes[i], lw.Provider); err != "" {
			return nil, bad(fmt.Sprintf("lanes[%d]", i), "%s", err)
		}
	}
	want := newLayout(lw.Paths, lw.Window, lw.MaxRanges).ringLen
	switch {
	case r.Rings.Len != want:
		return nil, bad("rings.len", "%d, want %d for these wire parameters", r.Rings.Len, want)
	case r.Rings.Addr == 0 || r.Rings.Addr > math.MaxUint64-uint64(want):
		return nil, bad("rings.addr", "%#x cannot hold %d bytes", r.Rings.Addr, want)
	}
	return &r, nil
}

// checkEndpoint returns what is wrong with ep, or "".
func checkEndpoint(ep *verbs.Endpoint, provider string) string {
	switch {
	case ep.Provider != provider:
		return fmt.Sprintf("provider %q, want %q", ep.Provider, provider)
	case ep.Addr == "" || len(ep.Addr) > maxAddrLen:
		return fmt.Sprintf("address of %d bytes, want 1..%d", len(ep.Addr), maxAddrLen)
	case len(ep.Host) > maxAddrLen:
		return fmt.Sprintf("host of %d bytes, want at most %d", len(ep.Host), maxAddrLen)
	case ep.RNRRetry > 7:
		return fmt.Sprintf("RNR retry %d, want 0..7", ep.RNRRetry)
	}
	return ""
}
