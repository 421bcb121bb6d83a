package tcp_test

import (
	"os"
	"testing"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/rdmacell/rdmacell/verbs/tcp"
	"github.com/rdmacell/rdmacell/verbs/verbstest"
)

// testSecret is the job secret of every device the tests open; a peer
// process re-executed by the tests opens its devices with it too.
var testSecret = []byte("tcp conformance test secret")

var provider = verbstest.Provider{
	Name: "tcp",
	Open: func() (verbs.Device, error) { return tcp.Open(tcp.Options{Secret: testSecret}) },
}

func TestMain(m *testing.M) {
	if _, ok := os.LookupEnv(silentPeerEnv); ok {
		os.Exit(serveSilentPeer())
	}
	verbstest.Main(m, provider)
}

func TestConformance(t *testing.T) { verbstest.Run(t, provider) }
