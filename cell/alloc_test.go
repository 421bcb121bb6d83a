package cell_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/cell"
	"github.com/rdmacell/rdmacell/verbs"
)

// The steady state of a transfer (cells out, immediate completions in,
// receives reposted, tokens back, new cells placed, timers ticking)
// allocates nothing.
func TestHotPathDoesNotAllocate(t *testing.T) {
	cfg := cell.Config{Peer: "B", Paths: 4, CellSize: 64 << 10, RecvDepth: 16, Window: 256}
	a, err := cell.New(cfg)
	require.NoError(t, err)
	b, err := cell.New(cfg)
	require.NoError(t, err)
	a.Ready()
	b.Ready()
	const huge = 1 << 40 // far more cells than the loop moves
	require.NoError(t, b.Recv(0, cell.RecvRange{Tag: 1, Addr: 1 << 44, RKey: 1, Len: huge}))
	require.NoError(t, a.Send(0, cell.SendRange{Tag: 1, Addr: 1 << 45, LKey: 2, Len: huge}))
	for _, g := range b.Ready().Grants {
		a.Grant(0, g.Grant)
	}

	now := int64(0)
	var wcs []verbs.WC
	var paths []int
	var toks []cell.Token
	step := func() {
		now += 1000
		rd := a.Ready()
		wcs, paths = wcs[:0], paths[:0]
		for _, p := range rd.Posts {
			for wr := p.WR; wr != nil; wr = wr.Next {
				if wr.Opcode == verbs.OpWriteImm {
					wcs = append(wcs, verbs.WC{Status: verbs.StatusSuccess, Opcode: verbs.OpRecvWriteImm, Flags: verbs.WCWithImm, Imm: wr.Imm})
					paths = append(paths, p.Path)
				}
			}
		}
		for i := range wcs {
			if err := b.Completion(now, paths[i], wcs[i]); err != nil {
				panic(err)
			}
		}
		toks = toks[:0]
		for _, tw := range b.Ready().Tokens {
			toks = append(toks, tw.Token)
		}
		now += 1000
		for _, tk := range toks {
			a.Token(now, tk)
		}
		a.Tick(now)
		b.Tick(now)
	}
	for range 100 { // warm the reusable slices up
		step()
	}
	before := a.Stats().CellsPosted
	require.Zero(t, testing.AllocsPerRun(200, step))
	require.Zero(t, a.Stats().GiveUps)
	require.Greater(t, a.Stats().CellsPosted, before+200, "cells moved while measured")
}
