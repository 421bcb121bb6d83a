//go:build ibverbs && cgo

package ibv

import (
	"errors"
	"testing"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/rdmacell/rdmacell/verbs/verbstest"
	"github.com/stretchr/testify/require"
)

// provider opens the device the environment names, or the first active
// port: on a cluster, set the knobs to test the port jobs will use.
var provider = verbstest.Provider{
	Name: ProviderName,
	Open: openFromEnv,
}

func openFromEnv() (verbs.Device, error) {
	o, err := OptionsFromEnv(Options{})
	if err != nil {
		return nil, err
	}
	return Open(o)
}

func TestMain(m *testing.M) { verbstest.Main(m, provider) }

// requireDevice skips the test when the machine has no RDMA device with
// an active port, as CI machines have not.
func requireDevice(t *testing.T) {
	t.Helper()
	d, err := openFromEnv()
	if errors.Is(err, ErrNoDevice) {
		t.Skipf("no RDMA device with an active port on this machine, skipping: %v", err)
	}
	require.NoError(t, err, "open the RDMA device")
	require.NoError(t, d.Close())
}

func TestConformance(t *testing.T) {
	requireDevice(t)
	verbstest.Run(t, provider)
}
