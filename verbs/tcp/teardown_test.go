package tcp

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rdmacell/rdmacell/internal/syncbuf"
	"github.com/rdmacell/rdmacell/verbs"
	"github.com/stretchr/testify/require"
)

// waitingSends connects count QP pairs between two devices and leaves on
// every b-side QP a SEND outstanding that its a-side peer holds in RNR
// (no receive posted): b owes an answer it will never get, which is when
// the end of the connection used to be logged as a failure.
func waitingSends(t *testing.T, e *env, count int) (as, bs []*tqp, la, lb *syncbuf.Buffer) {
	t.Helper()
	var pa, pb *PD
	_, pa, la = e.device(Options{})
	_, pb, lb = e.device(Options{})
	src := e.region(pb, 64, verbs.AccessLocalWrite)
	cfg := verbs.QPConfig{RNRRetry: 7} // the responder waits for a receive for ever
	for range count {
		a, b := e.qp(pa, cfg), e.qp(pb, cfg)
		connect(t, a, b)
		_, err := b.PostSend(&verbs.SendWR{ID: 1, Opcode: verbs.OpSend, Flags: verbs.Signaled, SGL: []verbs.SGE{sgeOf(src, 0, 8)}})
		require.NoError(t, err)
		as, bs = append(as, a), append(bs, b)
	}
	for _, b := range bs {
		waitFor(t, "the SEND to wait at the responder", func() bool {
			b.mu.Lock()
			defer b.mu.Unlock()
			return b.rnrWait
		})
	}
	return as, bs, la, lb
}

// warnings are the lines of log at warning level or above.
func warnings(log string) []string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			out = append(out, line)
		}
	}
	return out
}

// TestOrderlyTeardownIsQuiet closes and resets QPs whose peers still wait
// for them: the peers' requests fail (nobody will answer them) with an
// error that says the peer left, and neither side logs a warning. A QP
// whose connection ends without a goodbye, while its peer's device still
// runs (a reset with a frame half written), is no warning either.
func TestOrderlyTeardownIsQuiet(t *testing.T) {
	e := newEnv(t)
	as, bs, la, lb := waitingSends(t, e, 4)
	require.NoError(t, as[0].Close())
	require.NoError(t, as[1].Modify(verbs.StateErr, nil))
	require.NoError(t, as[2].Modify(verbs.StateReset, nil))
	closeRaw(t, as[3])
	for i, b := range bs {
		wc := waitWCs(t, b.send, 1)[0]
		require.Equal(t, verbs.StatusRetryExceeded, wc.Status, "qp pair %d", i)
		require.ErrorIs(t, b.Err(), ErrConnLost, "qp pair %d", i)
		if i < 3 {
			require.ErrorIs(t, b.Err(), ErrPeerLeft, "qp pair %d", i)
		} else {
			require.NotErrorIs(t, b.Err(), ErrPeerLeft, "qp pair %d", i)
		}
	}
	// The failure is logged after the completions: wait for the lines.
	waitFor(t, "the end of every connection to be logged", func() bool {
		return strings.Count(lb.String(), "its peer left") == 3 &&
			strings.Contains(lb.String(), "its peer, still running, closed the connection")
	})
	require.Empty(t, warnings(la.String()))
	require.Empty(t, warnings(lb.String()))
}

// closeRaw closes q's connection under it, without a goodbye.
func closeRaw(t *testing.T, q *tqp) {
	t.Helper()
	q.mu.Lock()
	l := q.link
	q.mu.Unlock()
	require.NoError(t, l.conn.Close())
}

// TestLostPeerWarnsOnce breaks the connections of several QPs to one peer
// without a goodbye and takes its listener away, as a crashed peer does:
// their requests fail as before, one warning names the peer, and the
// device's Close gives the count of the others.
func TestLostPeerWarnsOnce(t *testing.T) {
	e := newEnv(t)
	as, bs, _, lb := waitingSends(t, e, 4)
	require.NoError(t, as[0].pd.d.ln.Close())
	for _, a := range as {
		closeRaw(t, a) // no BYE: the socket just ends
	}
	for _, b := range bs {
		require.Equal(t, verbs.StatusRetryExceeded, waitWCs(t, b.send, 1)[0].Status)
		require.ErrorIs(t, b.Err(), ErrConnLost)
		require.NotErrorIs(t, b.Err(), ErrPeerLeft)
	}
	waitFor(t, "the warning", func() bool { return len(warnings(lb.String())) > 0 })
	w := warnings(lb.String())
	require.Len(t, w, 1, "one warning for one peer: %q", w)
	require.Contains(t, w[0], "tcp: QP failed")
	require.Contains(t, w[0], "peer=127.0.0.1:")

	require.NoError(t, bs[0].pd.d.Close())
	w = warnings(lb.String())
	require.Len(t, w, 2, "%q", w)
	require.Contains(t, w[1], "tcp: more warnings suppressed")
	require.Contains(t, w[1], "count=3")
}

// TestStrangerFloodBoundedLog sends a flood of strangers to a device:
// every one is refused, and the log holds one warning and, once the
// device closes, the count of the rest, not a line per stranger.
func TestStrangerFloodBoundedLog(t *testing.T) {
	e := newEnv(t)
	d, _, log := e.device(Options{HandshakeTimeout: time.Second})
	const strangers = 300
	start := time.Now()
	for range strangers {
		c, err := net.Dial("tcp", d.Addr())
		require.NoError(t, err)
		_, _ = c.Write([]byte("GET / HTTP/1.0\r\n\r\n" + strings.Repeat("x", 200)))
		_ = c.Close()
	}
	waitFor(t, "every stranger to be refused", func() bool {
		d.warn.mu.Lock()
		defer d.warn.mu.Unlock()
		s := d.warn.sources["127.0.0.1"]
		return s != nil && s.suppressed+countIntervalLines(log.String()) >= strangers-1
	})
	elapsed := time.Since(start)
	require.NoError(t, d.Close())
	w := warnings(log.String())
	// One warning, then one count per interval the flood lasted, and the
	// count Close gives.
	require.LessOrEqual(t, len(w), 2+int(elapsed/warnInterval), "%d lines", len(w))
	require.Contains(t, w[0], "tcp: refused connection")
	total := 1
	for _, line := range w[1:] {
		require.Contains(t, line, "tcp: more warnings suppressed")
		total += countOf(t, line)
	}
	require.Equal(t, strangers, total, "every refusal is logged or counted")
}

// countIntervalLines sums the counts of the suppression lines logged so
// far.
func countIntervalLines(log string) int {
	n := 0
	for _, line := range warnings(log) {
		if i := strings.Index(line, "count="); i >= 0 {
			var c int
			for _, r := range line[i+len("count="):] {
				if r < '0' || r > '9' {
					break
				}
				c = c*10 + int(r-'0')
			}
			n += c
		}
	}
	return n
}

func countOf(t *testing.T, line string) int {
	t.Helper()
	n := countIntervalLines(line)
	require.Positive(t, n, line)
	return n
}
