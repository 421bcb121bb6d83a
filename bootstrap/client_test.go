package bootstrap

import (
	"context"
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestJoinRefusedEndpoint joins through endpoints nobody serves: the join
// gives up after its bounded retries, long before its own deadline, with an
// error that names the endpoint and matches ErrUnreachable.
func TestJoinRefusedEndpoint(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refused := l.Addr().String()
	require.NoError(t, l.Close())

	for _, ep := range []string{refused, "rdmacell-no-such-host.invalid:2379", "unix:///nonexistent/rdmacell/etcd.sock"} {
		t.Run(ep, func(t *testing.T) {
			// A deadline the retries never reach: the error must come from
			// their bound, not from the context.
			ctx, cancel := context.WithTimeout(context.Background(), 10*testTimeout)
			defer cancel()
			_, err := Join(ctx, rankConfig(ClientConfig{Endpoints: []string{ep}}, "refused", 0, 1))
			require.ErrorIs(t, err, ErrUnreachable)
			require.NoError(t, ctx.Err())
			require.ErrorContains(t, err, ep[len(ep)-10:])
			require.ErrorContains(t, err, "after "+strconv.Itoa(probeAttempts)+" attempts")
			t.Log(err)
		})
	}
}
