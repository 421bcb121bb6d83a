//go:build ibverbs && cgo

package ibv

import (
	"errors"
	"testing"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/stretchr/testify/require"
)

func TestOpenUnknownDevice(t *testing.T) {
	t.Setenv(EnvDevice, "")
	t.Setenv(EnvPort, "")
	t.Setenv(EnvGIDIndex, "")
	d, err := Open(Options{Device: "no-such-rdma-device"})
	require.ErrorIs(t, err, ErrNoDevice)
	require.Nil(t, d)
	require.Contains(t, err.Error(), `"no-such-rdma-device"`, "the error names the device wanted")
}

func TestOpenBadEnvironment(t *testing.T) {
	t.Setenv(EnvGIDIndex, "three")
	_, err := openFromEnv()
	var envErr *EnvError
	require.True(t, errors.As(err, &envErr), "error %v is an *EnvError", err)
	require.ErrorIs(t, err, verbs.ErrInvalidArgument)
	require.Equal(t, EnvGIDIndex, envErr.Var)
}

func TestOpenBadOptions(t *testing.T) {
	_, err := Open(Options{PathMTU: 1500})
	require.ErrorIs(t, err, verbs.ErrInvalidArgument)
}

// TestDeviceObjects exercises the objects that need no peer on a real
// device: regions, CQs and the QP checks made before any state change.
func TestDeviceObjects(t *testing.T) {
	requireDevice(t)
	dev, err := openFromEnv()
	require.NoError(t, err)
	defer func() { require.NoError(t, dev.Close()) }()
	pd, err := dev.AllocPD()
	require.NoError(t, err)

	mem, err := verbs.Alloc(1 << 16)
	require.NoError(t, err)
	defer func() { require.NoError(t, mem.Free()) }()
	_, err = pd.RegMR(make([]byte, 4096), verbs.AccessLocalWrite)
	require.ErrorIs(t, err, verbs.ErrInvalidArgument, "Go heap memory cannot be registered")
	_, err = pd.RegMR(mem.Bytes(), verbs.AccessRemoteWrite)
	require.ErrorIs(t, err, verbs.ErrInvalidArgument, "remote write without local write")
	mr, err := pd.RegMR(mem.Bytes()[4096:], verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	require.NoError(t, err)
	require.Equal(t, mem.Addr()+4096, mr.Addr())
	require.Equal(t, 1<<16-4096, mr.Len())

	cq, err := dev.CreateCQ(16)
	require.NoError(t, err)
	_, err = dev.CreateCQ(0)
	require.ErrorIs(t, err, verbs.ErrInvalidArgument)
	_, err = pd.CreateQP(verbs.QPConfig{SendCQ: cq})
	require.ErrorIs(t, err, verbs.ErrInvalidArgument, "a QP without a receive CQ")
	_, err = pd.CreateQP(verbs.QPConfig{SendCQ: cq, RecvCQ: cq, RetryCount: 8})
	require.ErrorIs(t, err, verbs.ErrInvalidArgument, "a retry count ibverbs cannot express")

	q, err := pd.CreateQP(verbs.QPConfig{SendCQ: cq, RecvCQ: cq})
	require.NoError(t, err)
	require.ErrorIs(t, cq.Close(), verbs.ErrInvalidArgument, "closing a CQ a QP uses")
	require.ErrorIs(t, pd.Close(), verbs.ErrInvalidArgument, "closing a PD with a region and a QP")
	require.NoError(t, q.Modify(verbs.StateInit, nil))
	ep := q.Endpoint()
	require.Equal(t, ProviderName, ep.Provider)
	require.Equal(t, q.Num(), ep.QPN)
	require.NotZero(t, ep.MTU)
	require.NoError(t, q.Close())
	require.NoError(t, mr.Close())
	require.NoError(t, cq.Close())
	require.NoError(t, pd.Close())
}
