package driver

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/internal/syncbuf"
)

// At LevelTrace a connection logs every batch it acts on, in the trace
// format of package bind: the receiver's grant and token, the sender's
// cell and its range's tail, the ranges handed back. At debug level it logs none.
func TestTraceLevelLogsEveryBatch(t *testing.T) {
	for _, level := range []slog.Level{LevelTrace, slog.LevelDebug} {
		t.Run(level.String(), func(t *testing.T) { traceAt(t, level) })
	}
}

func traceAt(t *testing.T, level slog.Level) {
	var logs syncbuf.Buffer
	cfg := testConfig()
	cfg.Paths = 1
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: level}))
	pr := newPair(t, providers[0], cfg)
	ctx := bounded(t)
	src, dst := pr.a.region(100), pr.b.region(100)
	r, err := pr.b.conn.Recv(dst, 0, 100)
	require.NoError(t, err)
	s, err := pr.a.conn.Send(src, 0, 100)
	require.NoError(t, err)
	_, err = s.Wait(ctx)
	require.NoError(t, err)
	_, err = r.Wait(ctx)
	require.NoError(t, err)
	if level == slog.LevelDebug {
		require.NotContains(t, logs.String(), "cell driver: batch")
		return
	}
	// A batch is logged once acted on, after its events woke the waiters.
	wants := []string{"grant path=0 slot=0 seq=0 len=100", "post path=0 cell=0 len=100 wrs=1 tail seq=0 len=100 cells=0..0",
		"token path=0 slot=0 cell=0 ok", "sent tag=", "received tag="}
	require.Eventually(t, func() bool {
		out := logs.String()
		for _, want := range wants {
			if !strings.Contains(out, want) {
				return false
			}
		}
		return true
	}, testTimeout, time.Millisecond, "every batch logged: want %q in\n%s", wants, &logs)
}
