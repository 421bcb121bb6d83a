package driver

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/cell"
	"github.com/rdmacell/rdmacell/verbs"
)

func validSetup() *setupInfo {
	w := wireParams{Provider: "tcp", Paths: 2, MTU: 4096, Window: 64, MaxRanges: 8, RecvDepth: 16}
	ep := func(qpn uint32) verbs.Endpoint {
		return verbs.Endpoint{Provider: "tcp", Addr: "127.0.0.1:7000", QPN: qpn, PSN: 9}
	}
	return &setupInfo{
		Version: setupVersion,
		Wire:    w,
		Paths:   []verbs.Endpoint{ep(1), ep(2)},
		Lanes:   []verbs.Endpoint{ep(3), ep(4)},
		Rings:   ringInfo{Addr: 1 << 40, RKey: 5, Len: newLayout(w.Paths, w.Window, w.MaxRanges).ringLen},
	}
}

// Whatever the peer sends is checked field by field; the error names the
// peer and the field.
func TestParseSetupRejectsBadInput(t *testing.T) {
	encode := func(f func(s *setupInfo)) []byte {
		s := validSetup()
		f(s)
		b, err := json.Marshal(s)
		require.NoError(t, err)
		return b
	}
	for _, tc := range []struct {
		name  string
		in    []byte
		field string
	}{
		{"empty", nil, "(all)"},
		{"not json", []byte("{nope"), "(all)"},
		{"unknown field", []byte(`{"version":1,"extra":true}`), "(all)"},
		{"trailing garbage is not read", nil, ""},
		{"version", encode(func(s *setupInfo) { s.Version = 1 }), "version"},
		{"provider", encode(func(s *setupInfo) { s.Wire.Provider = "shm" }), "wire.provider"},
		{"paths", encode(func(s *setupInfo) { s.Wire.Paths = 3 }), "wire.paths"},
		{"mtu", encode(func(s *setupInfo) { s.Wire.MTU = 1024 }), "wire.mtu"},
		{"window", encode(func(s *setupInfo) { s.Wire.Window = 128 }), "wire.window"},
		{"max ranges", encode(func(s *setupInfo) { s.Wire.MaxRanges = 4 }), "wire.max_ranges"},
		{"recv depth", encode(func(s *setupInfo) { s.Wire.RecvDepth = 8 }), "wire.recv_depth"},
		{"first cell id", encode(func(s *setupInfo) { s.Wire.FirstCellID = 7 }), "wire.first_cell_id"},
		{"endpoint count", encode(func(s *setupInfo) { s.Paths = s.Paths[:1] }), "paths"},
		{"endpoint provider", encode(func(s *setupInfo) { s.Paths[1].Provider = "shm" }), "paths[1]"},
		{"endpoint address", encode(func(s *setupInfo) { s.Paths[0].Addr = "" }), "paths[0]"},
		{"long address", encode(func(s *setupInfo) { s.Paths[0].Addr = strings.Repeat("x", 300) }), "paths[0]"},
		{"rnr retry", encode(func(s *setupInfo) { s.Paths[1].RNRRetry = 8 }), "paths[1]"},
		{"lane count", encode(func(s *setupInfo) { s.Lanes = s.Lanes[:1] }), "lanes"},
		{"lane endpoint", encode(func(s *setupInfo) { s.Lanes[1].Provider = "" }), "lanes[1]"},
		{"ring length", encode(func(s *setupInfo) { s.Rings.Len-- }), "rings.len"},
		{"ring address", encode(func(s *setupInfo) { s.Rings.Addr = 0 }), "rings.addr"},
		{"ring wraps", encode(func(s *setupInfo) { s.Rings.Addr = ^uint64(0) - 10 }), "rings.addr"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.field == "" {
				b := encode(func(*setupInfo) {})
				_, err := parseSetup("rank 3", append(b, "garbage"...), validSetup())
				require.NoError(t, err, "one record is read; what follows is ignored")
				return
			}
			_, err := parseSetup("rank 3", tc.in, validSetup())
			require.ErrorIs(t, err, ErrSetup)
			var se *SetupError
			require.ErrorAs(t, err, &se)
			require.Equal(t, tc.field, se.Field)
			require.Equal(t, "rank 3", se.Peer)
			require.Contains(t, err.Error(), "peer rank 3")
			require.Contains(t, err.Error(), tc.field)
		})
	}
	got, err := parseSetup("rank 3", encode(func(*setupInfo) {}), validSetup())
	require.NoError(t, err)
	require.Equal(t, validSetup(), got)
}

// Dial refuses a peer whose wire parameters differ, naming the field, and
// leaves nothing behind.
func TestDialRejectsMismatchedPeer(t *testing.T) {
	p := providers[1]
	a, b := openEnd(t, p, "A"), openEnd(t, p, "B")
	t.Cleanup(func() {
		require.NoError(t, a.dev.Close())
		require.NoError(t, b.dev.Close())
	})
	xa, xb := pipe()
	ctx := bounded(t)
	errs := make(chan error, 2)
	for _, side := range []struct {
		e      *end
		x      Exchanger
		window int
	}{{a, xa, 64}, {b, xb, 128}} {
		go func() {
			cfg := testConfig()
			cfg.Peer, cfg.Device, cfg.PD = "peer of "+side.e.name, side.e.dev, side.e.pd
			cfg.Engine.Window = side.window
			c, err := Dial(ctx, cfg, side.x)
			if c != nil {
				_ = c.Close()
			}
			errs <- err
		}()
	}
	for range 2 {
		err := <-errs
		require.ErrorIs(t, err, ErrSetup)
		require.Contains(t, err.Error(), "wire.window")
	}
}

// A failing exchange fails Dial with the exchanger's error.
func TestDialExchangeFails(t *testing.T) {
	e := openEnd(t, providers[0], "A")
	t.Cleanup(func() { require.NoError(t, e.dev.Close()) })
	boom := errors.New("rendezvous unreachable")
	cfg := testConfig()
	cfg.Peer, cfg.Device, cfg.PD = "B", e.dev, e.pd
	_, err := Dial(bounded(t), cfg, ExchangeFunc(func(context.Context, []byte) ([]byte, error) { return nil, boom }))
	require.ErrorIs(t, err, boom)
	require.Contains(t, err.Error(), "peer B")
}

// Bad configurations and bad ranges are refused with cell.ErrInvalid.
func TestBadArguments(t *testing.T) {
	e := openEnd(t, providers[0], "A")
	t.Cleanup(func() { require.NoError(t, e.dev.Close()) })
	for _, cfg := range []Config{
		{Peer: "B"},
		{Peer: "B", Device: e.dev},
		{Peer: "B", Device: e.dev, PD: e.pd, Paths: cell.MaxPaths + 1},
		{Peer: "B", Device: e.dev, PD: e.pd, Policy: "fastest"},
		{Peer: "B", Device: e.dev, PD: e.pd, Paths: 2, LocalAddrs: []string{"127.0.0.1:0"}},
		{Peer: "B", Device: e.dev, PD: e.pd, Engine: cell.Config{Window: 100}},
	} {
		_, err := Dial(bounded(t), cfg, ExchangeFunc(func(ctx context.Context, b []byte) ([]byte, error) { return b, nil }))
		require.ErrorIs(t, err, cell.ErrInvalid, "%+v", cfg)
		require.Contains(t, err.Error(), "peer B")
	}

	pr := newPair(t, providers[0], testConfig())
	mr := pr.a.region(4096)
	for _, r := range [][2]int{{-1, 1}, {0, 4097}, {4000, 100}, {0, -1}} {
		_, err := pr.a.conn.Send(mr, r[0], r[1])
		require.ErrorIs(t, err, cell.ErrInvalid)
		_, err = pr.a.conn.Recv(mr, r[0], r[1])
		require.ErrorIs(t, err, cell.ErrInvalid)
	}
	_, err := pr.a.conn.Send(nil, 0, 1)
	require.ErrorIs(t, err, cell.ErrInvalid)
}

// Control messages from the peer are checked before use.
func TestDecodeControlMessage(t *testing.T) {
	ep := verbs.Endpoint{Provider: "tcp", Addr: "10.0.0.1:7000", QPN: 4, PSN: 5}
	buf := make([]byte, ctlMsgSize)
	enc := func(m ctlMsg) []byte {
		n, err := m.encode(buf)
		require.NoError(t, err)
		return append([]byte(nil), buf[:n]...)
	}
	for _, m := range []ctlMsg{
		{kind: msgEP, path: 3, gen: 7, ep: ep, seq: 12},
		{kind: msgRTS, path: 0, gen: 1 << 31, seq: 1<<32 - 1},
		{kind: msgDead, path: 2, gen: 9},
		{kind: msgBye},
	} {
		got, err := decodeCtl(enc(m), 4, "tcp")
		require.NoError(t, err)
		require.Equal(t, m, got)
	}
	good := enc(ctlMsg{kind: msgEP, path: 1, gen: 2, ep: ep})
	for name, b := range map[string][]byte{
		"short":          good[:5],
		"bad magic":      append([]byte{0}, good[1:]...),
		"bad kind":       append([]byte{ctlMagic, 9}, good[2:]...),
		"local kind":     append([]byte{ctlMagic, byte(msgCtlDown)}, good[2:]...),
		"path too high":  enc(ctlMsg{kind: msgRTS, path: 4}),
		"truncated":      good[:len(good)-3],
		"no endpoint":    enc(ctlMsg{kind: msgRTS, path: 1})[:ctlHeader],
		"wrong provider": enc(ctlMsg{kind: msgEP, path: 1, ep: verbs.Endpoint{Provider: "shm", Addr: "@x"}}),
	} {
		if name == "no endpoint" {
			b[1] = byte(msgEP)
		}
		_, err := decodeCtl(b, 4, "tcp")
		require.Error(t, err, name)
	}
}

// TestSpinsOnlyWhereItHelps: the progress goroutine polls in a loop only
// over a provider whose CQ polling does work (shm), not over tcp, where
// it would keep the network poller from running.
func TestSpinsOnlyWhereItHelps(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			pr := newPairWith(t, p, testConfig(), false)
			require.Equal(t, p.name == "shm", pr.a.conn.spin)
		})
	}
}

// An end that gets the peer's setup long after the peer got its (more
// than the QPs' retry budget) still connects: with a Confirmer, neither
// end probes before both are connected, where the first end's probes
// would otherwise run out of retries against a peer still waiting.
func TestDialWaitsForSlowPeer(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig()
			// A 500 ms budget, ample for the providers' own connection
			// at the first request even under the race detector, and
			// the slow end four times that late.
			cfg.QP.Timeout, cfg.QP.RetryCount = 250*time.Millisecond, 1
			a, b := openEnd(t, p, "A"), openEnd(t, p, "B")
			t.Cleanup(func() { require.NoError(t, a.dev.Close()); require.NoError(t, b.dev.Close()) })
			xa, xb := slowPipe(2 * time.Second)
			var wg sync.WaitGroup
			var errA, errB error
			var ca, cb *Conn
			dial := func(e *end, peer string, x Exchanger, c **Conn, err *error) {
				defer wg.Done()
				cf := cfg
				cf.Peer, cf.Device, cf.PD = peer, e.dev, e.pd
				*c, *err = Dial(bounded(t), cf, x)
			}
			wg.Add(2)
			go dial(a, "B", xa, &ca, &errA)
			go dial(b, "A", xb, &cb, &errB)
			wg.Wait()
			for _, c := range []*Conn{ca, cb} {
				if c != nil {
					t.Cleanup(func() { require.NoError(t, closeBounded(c)) })
				}
			}
			require.NoError(t, errA, "dial from A")
			require.NoError(t, errB, "dial from B")
		})
	}
}
