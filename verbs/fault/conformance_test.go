package fault_test

import (
	"testing"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/rdmacell/rdmacell/verbs/fault"
	"github.com/rdmacell/rdmacell/verbs/shm"
	"github.com/rdmacell/rdmacell/verbs/tcp"
	"github.com/rdmacell/rdmacell/verbs/verbstest"
)

// testSecret is the job secret of every tcp device the tests open, in this
// process and in the suite's peer processes.
var testSecret = []byte("fault wrapper test secret")

func openTCP() (verbs.Device, error) { return tcp.Open(tcp.Options{Secret: testSecret}) }

func openSHM() (verbs.Device, error) { return shm.Open(shm.Options{}) }

// wrapped opens a device of a provider and wraps it.
func wrapped(open func() (verbs.Device, error)) func() (verbs.Device, error) {
	return func() (verbs.Device, error) {
		d, err := open()
		if err != nil {
			return nil, err
		}
		return fault.Wrap(d), nil
	}
}

// providers are the wrapped providers the conformance suite runs over:
// without a fault injected the wrapper must be invisible.
var providers = []verbstest.Provider{
	{Name: "fault+shm", Open: wrapped(openSHM)},
	{Name: "fault+tcp", Open: wrapped(openTCP)},
}

func TestMain(m *testing.M) { verbstest.Main(m, providers[0], providers[1:]...) }

func TestConformance(t *testing.T) {
	for _, p := range providers {
		t.Run(p.Name, func(t *testing.T) { verbstest.Run(t, p) })
	}
}
