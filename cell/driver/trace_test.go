package driver

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/internal/syncbuf"
)

// At LevelTrace a connection logs every batch it acts on, in the trace
// format of package bind: the receiver's grant and token, the sender's
// cell and final, the ranges handed back. At debug level it logs none.
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
	out := logs.String()
	if level == slog.LevelDebug {
		require.NotContains(t, out, "cell driver: batch")
		return
	}
	for _, want := range []string{"grant path=0 slot=0 seq=0 len=100", "post path=0 cell=0 len=100 wrs=1",
		"token path=0 slot=0 cell=0 ok", "final path=0 slot=0 seq=0 len=100 ok", "sent tag=", "received tag="} {
		require.Contains(t, out, want)
	}
}
