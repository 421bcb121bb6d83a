package verbstest

import (
	"fmt"
	"os"
	"testing"

	"github.com/rdmacell/rdmacell/verbs"
)

// Provider is a verbs provider under test.
type Provider struct {
	// Name names the provider in test output and tells a peer process
	// which provider to serve.
	Name string
	// Open opens a fresh device of the provider in this process. The
	// suite opens several at once and closes each it opened.
	Open func() (verbs.Device, error)
}

// testCase is one conformance check; its name becomes the subtest's.
type testCase struct {
	name string
	run  func(t *testing.T, p Provider)
}

// cases is the whole suite, in the order Run runs it.
var cases = []testCase{
	{"Write/Placement", testWritePlacement},
	{"Write/ScatterGather", testWriteScatterGather},
	{"Write/64MiB", testWriteLarge},
	{"Write/TooManySGEs", testWriteTooManySGEs},
	{"Write/SignaledOnly", testSignaledOnly},
	{"Write/Relaxed", testRelaxed},
	{"WriteImm/ConsumesReceive", testWriteImmConsumesReceive},
	{"WriteImm/RNRRetryExceeded", testRNRRetryExceeded},
	{"WriteImm/RNRRecovers", testRNRRecovers},
	{"Chain/ImmProvesWrite", testChainImmProvesWrite},
	{"Send/Scatter", testSendScatter},
	{"Send/TooLarge", testSendTooLarge},
	{"Access/Remote", testRemoteAccess},
	{"Access/Local", testLocalProtection},
	{"State/PostOutsideRTS", testPostOutsideRTS},
	{"State/Transitions", testTransitions},
	{"State/FlushOnErr", testFlushOnErr},
	{"State/ResetDiscards", testResetDiscards},
	{"State/Reconnect", testReconnect},
	{"State/CloseFlushes", testCloseFlushes},
	{"Queue/SendFull", testSendQueueFull},
	{"Queue/RecvFull", testRecvQueueFull},
	{"CQ/Wait", testCQWait},
	{"Endpoint/JSON", testEndpointJSON},
	{"Independent/RNRBlocked", testIndependentQPs},
	{"Concurrent/Post", testConcurrentPost},
	{"Process/Write", testProcessWrite},
	{"Process/PeerKilled", testPeerKilled},
}

// Run runs the whole conformance suite against p, each case as a subtest.
func Run(t *testing.T, p Provider) {
	t.Helper()
	if p.Open == nil {
		t.Fatalf("verbstest: provider %q has no Open", p.Name)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, p) })
	}
}

// peerEnv names the environment variable that turns a test binary into a
// suite peer; its value is the name of the provider to serve.
const peerEnv = "RDMACELL_VERBSTEST_PEER"

// Main is called from a provider's TestMain. When the suite started this
// process as a peer it serves as one and exits; otherwise it runs the tests
// and exits with their status. A test binary that runs the suite for
// several providers passes them all, so that a peer can serve any of them.
func Main(m *testing.M, p Provider, more ...Provider) {
	name, ok := os.LookupEnv(peerEnv)
	if !ok {
		os.Exit(m.Run())
	}
	for _, q := range append([]Provider{p}, more...) {
		if q.Name == name {
			os.Exit(servePeer(q, os.Stdin, os.Stdout))
		}
	}
	fmt.Fprintf(os.Stderr, "verbstest: peer for provider %q requested, this binary serves %q\n", name, p.Name)
	os.Exit(2)
}
