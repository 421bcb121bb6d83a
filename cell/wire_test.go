package cell_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/cell"
)

func TestWireRoundTrip(t *testing.T) {
	tok := cell.Token{ID: 1<<32 - 1, Path: 63, Status: cell.TokenDup, RxTime: 1<<31 + 5}
	b := make([]byte, cell.TokenSize)
	cell.PutToken(b, tok)
	got, ok := cell.ReadToken(b)
	require.True(t, ok)
	require.Equal(t, tok, got)

	g := cell.Grant{Seq: 7, Addr: 0xdeadbeef000, RKey: 0x1234, Len: 1 << 40}
	b = make([]byte, cell.GrantSize)
	cell.PutGrant(b, g)
	gg, ok := cell.ReadGrant(b)
	require.True(t, ok)
	require.Equal(t, g, gg)

	f := cell.Final{Seq: 9, Len: 12345, Status: cell.FinalTooLong}
	b = make([]byte, cell.FinalSize)
	cell.PutFinal(b, f)
	ff, ok := cell.ReadFinal(b)
	require.True(t, ok)
	require.Equal(t, f, ff)
}

// A zeroed slot, or one whose write tore, does not decode.
func TestWireRejectsTornAndEmptySlots(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
		put  func([]byte)
		read func([]byte) bool
	}{
		{"token", cell.TokenSize,
			func(b []byte) { cell.PutToken(b, cell.Token{ID: 42, Path: 1, Status: cell.TokenOK, RxTime: 99}) },
			func(b []byte) bool { _, ok := cell.ReadToken(b); return ok }},
		{"grant", cell.GrantSize,
			func(b []byte) { cell.PutGrant(b, cell.Grant{Seq: 3, Addr: 1 << 40, RKey: 5, Len: 4096}) },
			func(b []byte) bool { _, ok := cell.ReadGrant(b); return ok }},
		{"final", cell.FinalSize,
			func(b []byte) { cell.PutFinal(b, cell.Final{Seq: 3, Len: 4096, Status: cell.FinalOK}) },
			func(b []byte) bool { _, ok := cell.ReadFinal(b); return ok }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := make([]byte, tc.size)
			require.False(t, tc.read(b), "an empty slot")
			tc.put(b)
			require.True(t, tc.read(b))
			// A write that tore: some bytes are from another record.
			b[2] ^= 0x5A
			require.False(t, tc.read(b), "a torn record")
		})
	}
}

// A slot whose record is replaced by another is read, in the worst
// case, with every 8-byte word from either record (an RNIC or a provider
// places a WRITE in pieces, in any order). No mix decodes, only the
// records themselves; nor does the old record with any run of its bytes
// zeroed, a write landing into a cleared slot.
func TestWireRejectsMixedRecords(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
		put  func(b []byte, k uint32)
		read func([]byte) (uint32, bool)
	}{
		{"token", cell.TokenSize,
			func(b []byte, k uint32) {
				cell.PutToken(b, cell.Token{ID: 0x1000 + k, Path: int(k % 4), Status: cell.TokenOK, RxTime: int64(k) << 20})
			},
			func(b []byte) (uint32, bool) { x, ok := cell.ReadToken(b); return x.ID - 0x1000, ok }},
		{"grant", cell.GrantSize,
			func(b []byte, k uint32) {
				cell.PutGrant(b, cell.Grant{Seq: k, Addr: 0x7f0000000000 + uint64(k)<<16, RKey: 9, Len: int64(k) << 10})
			},
			func(b []byte) (uint32, bool) { x, ok := cell.ReadGrant(b); return x.Seq, ok }},
		{"final", cell.FinalSize,
			func(b []byte, k uint32) {
				cell.PutFinal(b, cell.Final{Seq: k, Len: int64(k) * 3, Status: cell.FinalOK})
			},
			func(b []byte) (uint32, bool) { x, ok := cell.ReadFinal(b); return x.Seq, ok }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			words := tc.size / 8
			a, b, mix := make([]byte, tc.size), make([]byte, tc.size), make([]byte, tc.size)
			for k := uint32(0); k < 512; k++ {
				tc.put(a, k)
				tc.put(b, k+64)
				for m := 1; m < 1<<words-1; m++ {
					for w := range words {
						src := a
						if m&(1<<w) != 0 {
							src = b
						}
						copy(mix[8*w:8*w+8], src[8*w:8*w+8])
					}
					_, ok := tc.read(mix)
					require.False(t, ok, "record %d mixed with %d, words %b", k, k+64, m)
				}
				for lo := 0; lo < tc.size; lo++ {
					for hi := lo + 1; hi <= tc.size; hi++ {
						if lo == 0 && hi == tc.size {
							continue
						}
						copy(mix, a)
						clear(mix[lo:hi])
						if got, ok := tc.read(mix); ok {
							require.Equal(t, k, got, "record %d with bytes %d..%d zeroed", k, lo, hi)
						}
					}
				}
			}
		})
	}
}

func TestConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  cell.Config
		want string
	}{
		{"no paths", cell.Config{Peer: "r3"}, "Paths = 0"},
		{"too many paths", cell.Config{Paths: 65}, "Paths = 65"},
		{"window not a power of two", cell.Config{Paths: 1, Window: 100}, "Window = 100"},
		{"ranges not a power of two", cell.Config{Paths: 1, MaxRanges: 3}, "MaxRanges = 3"},
		{"cell bounds crossed", cell.Config{Paths: 1, MinCellSize: 1 << 20, MaxCellSize: 1 << 10}, "MinCellSize"},
		{"negative cell", cell.Config{Paths: 1, CellSize: -1}, "CellSize = -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cell.New(tc.cfg)
			require.ErrorIs(t, err, cell.ErrInvalid)
			require.ErrorContains(t, err, tc.want)
		})
	}
	_, err := cell.New(cell.Config{Peer: "r3"})
	require.ErrorContains(t, err, "peer r3")
}

// Inputs that name a path that does not exist, or ranges that cannot be,
// are errors; too many ranges at once is ErrBusy.
func TestInputValidation(t *testing.T) {
	e, err := cell.New(cell.Config{Peer: "r1", Paths: 2, MaxRanges: 2})
	require.NoError(t, err)
	e.Ready()
	require.ErrorIs(t, e.PathReset(0, 2), cell.ErrInvalid)
	require.ErrorIs(t, e.PathFailed(0, -1, nil), cell.ErrInvalid)
	require.ErrorIs(t, e.PathDead(0, 5, nil), cell.ErrInvalid)
	require.ErrorIs(t, e.Completion(0, 9, verbsWC()), cell.ErrInvalid)
	require.ErrorIs(t, e.Send(0, cell.SendRange{Len: -1}), cell.ErrInvalid)
	require.ErrorIs(t, e.Recv(0, cell.RecvRange{Len: -1}), cell.ErrInvalid)
	for range 2 {
		require.NoError(t, e.Send(0, cell.SendRange{Len: 10}))
		require.NoError(t, e.Recv(0, cell.RecvRange{Len: 10}))
	}
	require.ErrorIs(t, e.Send(0, cell.SendRange{Len: 10}), cell.ErrBusy)
	require.ErrorIs(t, e.Recv(0, cell.RecvRange{Len: 10}), cell.ErrBusy)
}
