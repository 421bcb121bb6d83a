package verbs_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestAllocIsZeroedAndLookupFindsIt(t *testing.T) {
	m, err := verbs.Alloc(10_000)
	require.NoError(t, err)
	defer m.Free()
	require.Equal(t, 10_000, m.Len())
	assert.Zero(t, m.MappedLen()%4096)
	for _, b := range m.Bytes() {
		require.Zero(t, b)
	}
	sub := m.Bytes()[100:200]
	got, off, err := verbs.Lookup(sub)
	require.NoError(t, err)
	assert.Same(t, m, got)
	assert.Equal(t, 100, off)
	assert.Equal(t, m.Addr()+100, verbs.AddrOf(sub))
}

func TestLookupRejectsForeignMemory(t *testing.T) {
	m, err := verbs.Alloc(4096)
	require.NoError(t, err)
	defer m.Free()
	cases := map[string][]byte{
		"go heap": make([]byte, 64),
		"empty":   nil,
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, err := verbs.Lookup(b)
			assert.True(t, errors.Is(err, verbs.ErrInvalidArgument), "%v", err)
		})
	}
}

func TestLookupAfterFree(t *testing.T) {
	m, err := verbs.Alloc(4096)
	require.NoError(t, err)
	b := m.Bytes()
	require.NoError(t, m.Free())
	_, _, err = verbs.Lookup(b[:1])
	assert.ErrorIs(t, err, verbs.ErrInvalidArgument)
}

func TestAllocRejectsBadSize(t *testing.T) {
	for _, n := range []int{0, -1} {
		_, err := verbs.Alloc(n)
		assert.ErrorIs(t, err, verbs.ErrInvalidArgument, "size %d", n)
	}
}

func TestCanTransition(t *testing.T) {
	allowed := map[[2]verbs.QPState]bool{
		{verbs.StateReset, verbs.StateInit}: true,
		{verbs.StateInit, verbs.StateRTR}:   true,
		{verbs.StateRTR, verbs.StateRTS}:    true,
	}
	states := []verbs.QPState{verbs.StateReset, verbs.StateInit, verbs.StateRTR, verbs.StateRTS, verbs.StateErr}
	for _, from := range states {
		for _, to := range states {
			want := allowed[[2]verbs.QPState{from, to}] || to == verbs.StateErr || to == verbs.StateReset
			assert.Equal(t, want, verbs.CanTransition(from, to), "%v -> %v", from, to)
		}
	}
}

func TestEndpointJSONRoundTrip(t *testing.T) {
	ep := verbs.Endpoint{Provider: "tcp", Addr: "127.0.0.1:4000", QPN: 7, PSN: 99, Host: "h", LID: 3, MTU: 4096, RNRRetry: 7}
	ep.GID[15] = 1
	b, err := json.Marshal(ep)
	require.NoError(t, err)
	var got verbs.Endpoint
	require.NoError(t, json.Unmarshal(b, &got))
	assert.Equal(t, ep, got)
}

func TestStringers(t *testing.T) {
	assert.Equal(t, "WRITE_WITH_IMM", verbs.OpWriteImm.String())
	assert.Equal(t, "RTS", verbs.StateRTS.String())
	assert.Equal(t, "flushed", verbs.StatusWRFlush.String())
	err := &verbs.WCError{WC: verbs.WC{ID: 3, QPN: 9, Opcode: verbs.OpWrite, Status: verbs.StatusRemoteAccess}}
	assert.Equal(t, "verbs: WRITE wr 3 on qp 9: remote access error", err.Error())
}

func TestAllocIsSealedAgainstResizing(t *testing.T) {
	m, err := verbs.Alloc(4096)
	require.NoError(t, err)
	defer m.Free()
	seals, err := unix.FcntlInt(uintptr(m.Fd()), unix.F_GET_SEALS, 0)
	require.NoError(t, err)
	assert.Equal(t, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL, seals&(unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL))
	assert.Error(t, unix.Ftruncate(m.Fd(), 0), "a sealed file cannot shrink under a peer's mapping")
}

// Adopted memory is found by Lookup until Free, which leaves its bytes
// alone; it cannot overlap other memory, and has no memory file.
func TestAdopt(t *testing.T) {
	b := make([]byte, 1000)
	m, err := verbs.Adopt(b[100:900])
	require.NoError(t, err)
	require.True(t, m.Adopted())
	require.Equal(t, -1, m.Fd())
	got, off, err := verbs.Lookup(b[200:300])
	require.NoError(t, err)
	require.Same(t, m, got)
	require.Equal(t, 100, off)
	_, _, err = verbs.Lookup(b[800:901])
	require.ErrorIs(t, err, verbs.ErrInvalidArgument, "a range past the adopted memory")

	for name, r := range map[string][]byte{"inside": b[300:400], "before": b[:101], "after": b[899:], "around": b} {
		_, err := verbs.Adopt(r)
		require.ErrorIs(t, err, verbs.ErrInvalidArgument, "adopting memory that overlaps it %s", name)
	}
	_, err = verbs.Adopt(nil)
	require.ErrorIs(t, err, verbs.ErrInvalidArgument)

	a, err := verbs.Alloc(4096)
	require.NoError(t, err)
	defer a.Free()
	require.False(t, a.Adopted())
	_, err = verbs.Adopt(a.Bytes()[10:20])
	require.ErrorIs(t, err, verbs.ErrInvalidArgument, "adopting an allocation's bytes")

	b[500] = 7
	require.NoError(t, m.Free())
	require.Equal(t, byte(7), b[500], "Free left the bytes to their owner")
	_, _, err = verbs.Lookup(b[200:300])
	require.ErrorIs(t, err, verbs.ErrInvalidArgument)
	again, err := verbs.Adopt(b)
	require.NoError(t, err, "adopting after Free")
	require.NoError(t, again.Free())
}
