package comm

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/bootstrap"
	"github.com/rdmacell/rdmacell/flight"
)

func init() { scenarios["metrics"] = scenarioMetrics }

// scenarioMetrics says where the rank serves its metrics, then plays
// ping-pong with the other rank for as many rounds as each "rounds N"
// line asks, each round an operation of the flight recorder, and says
// "done" after each batch; "stop" ends it.
func scenarioMetrics(ctx context.Context, c *Comm, in *bufio.Scanner) error {
	fmt.Println("metrics", c.MetricsAddr())
	buf := make([]byte, 64)
	other := 1 - c.Rank()
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		if cmd == "stop" {
			return nil
		}
		rounds, err := strconv.Atoi(arg)
		if cmd != "rounds" || err != nil {
			return fmt.Errorf("instruction %q", in.Text())
		}
		for range rounds {
			h := c.Recorder().Begin(&flight.Op{Name: "PingPong", Bytes: int64(len(buf))})
			if c.Rank() == 0 {
				err = c.Send(ctx, other, 1, buf)
				if err == nil {
					_, err = c.Recv(ctx, other, 1, buf)
				}
			} else {
				_, err = c.Recv(ctx, other, 1, buf)
				if err == nil {
					err = c.Send(ctx, other, 1, buf)
				}
			}
			c.Recorder().End(h, err)
			if err != nil {
				return err
			}
		}
		fmt.Println("done")
	}
	return fmt.Errorf("standard input ended: %v", in.Err())
}

// Two ranks in two processes over tcp, each serving metrics on a port the
// system chose: scraped over HTTP between batches of traffic and while
// one runs, the text parses as Prometheus exposition, the operation
// counts are exactly the rounds played, the bytes of the paths and of the
// peer grow with the traffic, and every family has the labels it should.
func TestProcessMetrics(t *testing.T) {
	srv := startServer(t)
	ctx := bounded(t)
	procs := startRanks(t, srv, 2, "metrics", EnvTransport+"=tcp", EnvMetricsAddr+"=127.0.0.1:0")
	addrs := make([]string, len(procs))
	for i, p := range procs {
		addrs[i] = strings.TrimPrefix(p.expect(ctx, t, "metrics "), "metrics ")
		require.NotEmpty(t, addrs[i])
	}
	round := func(n int) {
		for _, p := range procs {
			p.send(t, fmt.Sprintf("rounds %d", n))
		}
	}
	waitDone := func() {
		for _, p := range procs {
			p.expect(ctx, t, "done")
		}
	}

	round(100)
	waitDone()
	first := make([]families, len(procs))
	for i, a := range addrs {
		first[i] = scrape(t, a)
		checkLabels(t, first[i], i)
	}

	// Scrapes while the traffic flows parse too.
	round(1000)
	for i, a := range addrs {
		checkLabels(t, scrape(t, a), i)
	}
	waitDone()

	for i, a := range addrs {
		second := scrape(t, a)
		checkLabels(t, second, i)
		peer := strconv.Itoa(1 - i)
		op := map[string]string{"rank": strconv.Itoa(i), "op": "PingPong", "size": "le1KiB"}
		require.Equal(t, uint64(100), first[i].histogram(t, "rdmacell_op_duration_seconds", op).GetSampleCount())
		require.Equal(t, uint64(1100), second.histogram(t, "rdmacell_op_duration_seconds", op).GetSampleCount())
		require.Zero(t, second.value(t, "rdmacell_op_failures_total", op))

		pl := map[string]string{"rank": strconv.Itoa(i), "peer": peer}
		require.Equal(t, 100.0, first[i].value(t, "rdmacell_peer_sent_messages_total", pl))
		require.Equal(t, 1100.0, second.value(t, "rdmacell_peer_sent_messages_total", pl))
		require.Equal(t, 1100.0*64, second.value(t, "rdmacell_peer_received_bytes_total", pl))
		require.Equal(t, 1.0, second.value(t, "rdmacell_peer_connected", pl))

		before := first[i].sum("rdmacell_path_bytes_total", map[string]string{"link": LinkControl})
		after := second.sum("rdmacell_path_bytes_total", map[string]string{"link": LinkControl})
		require.Greater(t, after, before, "rank %d: the control link's paths carried the messages", i)
		require.GreaterOrEqual(t, after-before, 1000.0*64)
		require.Greater(t, second.sum("rdmacell_traffic_bytes_total", nil), first[i].sum("rdmacell_traffic_bytes_total", nil))
		require.Greater(t, second.sum("rdmacell_link_tokens_total", nil), first[i].sum("rdmacell_link_tokens_total", nil))
		require.Greater(t, second.sum("rdmacell_path_tokens_total", nil), first[i].sum("rdmacell_path_tokens_total", nil))
		// Each path is in exactly one state.
		inState := map[string]float64{}
		for _, m := range second["rdmacell_path_state"].GetMetric() {
			inState[label(m, "link")+"/"+label(m, "path")] += m.GetGauge().GetValue()
		}
		require.Equal(t, map[string]float64{"control/0": 1, "control/1": 1}, inState)
	}
	for _, p := range procs {
		p.send(t, "stop")
	}
	for _, p := range procs {
		p.expect(ctx, t, "ok")
		p.wait(ctx, t)
	}
	for _, a := range addrs {
		_, err := net.DialTimeout("tcp", a, time.Second)
		require.Error(t, err, "the endpoint went with the rank")
	}
}

// wantLabels are the label names of the families of the communicator.
var wantLabels = map[string][]string{
	"rdmacell_op_duration_seconds":       {"op", "rank", "size"},
	"rdmacell_op_failures_total":         {"op", "rank", "size"},
	"rdmacell_peer_info":                 {"host", "peer", "rank", "transport"},
	"rdmacell_peer_sent_bytes_total":     {"peer", "rank"},
	"rdmacell_peer_live_handles":         {"peer", "rank"},
	"rdmacell_link_tokens_total":         {"link", "peer", "rank"},
	"rdmacell_link_give_ups_total":       {"link", "peer", "rank"},
	"rdmacell_path_bytes_total":          {"link", "path", "peer", "rank"},
	"rdmacell_path_cells_total":          {"link", "path", "peer", "rank"},
	"rdmacell_path_rtt_seconds":          {"link", "path", "peer", "rank"},
	"rdmacell_path_soft_timeout_seconds": {"link", "path", "peer", "rank"},
	"rdmacell_path_late_margin_seconds":  {"link", "path", "peer", "rank"},
	"rdmacell_path_soft_timeouts_total":  {"link", "path", "peer", "rank"},
	"rdmacell_path_give_ups_total":       {"link", "path", "peer", "rank"},
	"rdmacell_path_promotions_total":     {"link", "path", "peer", "rank"},
	"rdmacell_path_tokens_total":         {"link", "path", "peer", "rank"},
	"rdmacell_path_resets_total":         {"link", "path", "peer", "rank"},
	"rdmacell_path_state":                {"link", "path", "peer", "rank", "state"},
	"rdmacell_traffic_bytes_total":       {"path", "rank"},
	"rdmacell_memory_registered_bytes":   {"kind", "rank"},
	"rdmacell_staging_bytes":             {"dir", "rank"},
}

// checkLabels checks that rank's families have the labels they should,
// with the rank, peers, links and paths of a job of two ranks with two
// paths per link.
func checkLabels(t *testing.T, fs families, rank int) {
	t.Helper()
	for name, want := range wantLabels {
		f := fs[name]
		require.NotNil(t, f, "no family %s", name)
		require.NotEmpty(t, f.GetMetric(), name)
		for _, m := range f.GetMetric() {
			var got []string
			for _, l := range m.GetLabel() {
				got = append(got, l.GetName())
			}
			sort.Strings(got)
			require.Equal(t, want, got, name)
			require.Equal(t, strconv.Itoa(rank), label(m, "rank"), name)
		}
	}
	seen := map[string]bool{}
	for _, m := range fs["rdmacell_path_bytes_total"].GetMetric() {
		require.Equal(t, strconv.Itoa(1-rank), label(m, "peer"), "only the other rank is connected")
		seen[label(m, "link")+"/"+label(m, "path")] = true
	}
	// Small messages only: the bulk connection is never dialed.
	require.Equal(t, map[string]bool{"control/0": true, "control/1": true}, seen)
	h := fs["rdmacell_op_duration_seconds"]
	require.Equal(t, dto.MetricType_HISTOGRAM, h.GetType())
	for _, m := range h.GetMetric() {
		b := m.GetHistogram().GetBucket()
		require.Len(t, b, flight.NumBuckets, "the recorder's buckets, the last one +Inf")
		require.Equal(t, flight.BucketBound(0).Seconds(), b[0].GetUpperBound())
		require.Equal(t, flight.BucketBound(flight.NumBuckets-2).Seconds(), b[flight.NumBuckets-2].GetUpperBound())
		require.True(t, math.IsInf(b[flight.NumBuckets-1].GetUpperBound(), 1))
		require.Equal(t, m.GetHistogram().GetSampleCount(), b[flight.NumBuckets-1].GetCumulativeCount())
	}
	require.NotNil(t, fs["go_goroutines"], "the Go runtime's metrics are served too")
	require.Equal(t, dto.MetricType_COUNTER, fs["rdmacell_path_bytes_total"].GetType())
	require.Equal(t, dto.MetricType_GAUGE, fs["rdmacell_path_rtt_seconds"].GetType())
}

// families are the metric families of one scrape, by name.
type families map[string]*dto.MetricFamily

// scrape gets /metrics at addr over HTTP and parses it.
func scrape(t *testing.T, addr string) families {
	t.Helper()
	// No connection is kept: the tests count goroutines and sockets.
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	cl := http.Client{Timeout: 10 * time.Second, Transport: tr}
	resp, err := cl.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	require.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain"), resp.Header.Get("Content-Type"))
	p := expfmt.NewTextParser(model.LegacyValidation)
	fs, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	require.NoError(t, err, "%s", body)
	return fs
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func (fs families) matching(name string, labels map[string]string) []*dto.Metric {
	var ms []*dto.Metric
next:
	for _, m := range fs[name].GetMetric() {
		for k, v := range labels {
			if label(m, k) != v {
				continue next
			}
		}
		ms = append(ms, m)
	}
	return ms
}

// one returns the single series of name with the labels.
func (fs families) one(t *testing.T, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	ms := fs.matching(name, labels)
	require.Len(t, ms, 1, "%s%v", name, labels)
	return ms[0]
}

func (fs families) histogram(t *testing.T, name string, labels map[string]string) *dto.Histogram {
	t.Helper()
	return fs.one(t, name, labels).GetHistogram()
}

func (fs families) value(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	m := fs.one(t, name, labels)
	if m.Counter != nil {
		return m.GetCounter().GetValue()
	}
	return m.GetGauge().GetValue()
}

// sum adds the counters of name with the labels.
func (fs families) sum(name string, labels map[string]string) float64 {
	var s float64
	for _, m := range fs.matching(name, labels) {
		s += m.GetCounter().GetValue()
	}
	return s
}

// Without MetricsAddr a rank opens no listening socket; with it each
// opens one, serves, and closes it with the communicator.
func TestMetricsOnlyWhenAsked(t *testing.T) {
	base := listeningSockets(t)
	comms := startComms(t, 2, TransportShm, nil)
	for _, c := range comms {
		require.Empty(t, c.MetricsAddr())
	}
	require.Equal(t, base, listeningSockets(t), "no endpoint unless asked for")
	closeAll(t, comms)

	comms = startComms(t, 2, TransportShm, func(o *Options) { o.MetricsAddr = "127.0.0.1:0" })
	require.Equal(t, base+2, listeningSockets(t))
	for i, c := range comms {
		fs := scrape(t, c.MetricsAddr())
		require.Equal(t, 1.0, fs.value(t, "rdmacell_peer_info",
			map[string]string{"rank": strconv.Itoa(i), "peer": strconv.Itoa(1 - i), "transport": "shm"}))
		require.Equal(t, 0.0, fs.value(t, "rdmacell_peer_connected",
			map[string]string{"rank": strconv.Itoa(i), "peer": strconv.Itoa(1 - i)}), "not needed yet")
	}
	closeAll(t, comms)
	require.Equal(t, base, listeningSockets(t), "Close stops the endpoint")
}

// An address that cannot be listened on fails Init, naming it and the
// variable that sets it.
func TestMetricsListenFailure(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	store := bootstrap.NewLocalStore()
	defer store.Close()
	o := localOptions(store, jobID(t), 0, 1, TransportShm)
	o.MetricsAddr = ln.Addr().String()
	c, err := Init(bounded(t), o)
	require.Nil(t, c)
	require.Error(t, err)
	require.Contains(t, err.Error(), ln.Addr().String())
	require.Contains(t, err.Error(), EnvMetricsAddr)
	require.Contains(t, err.Error(), "rank 0")
}

// listeningSockets counts the TCP sockets this process listens on.
func listeningSockets(t *testing.T) int {
	t.Helper()
	listen := map[string]bool{}
	for _, f := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		b, err := os.ReadFile(f)
		if os.IsNotExist(err) {
			continue
		}
		require.NoError(t, err)
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fields := strings.Fields(line)
			if len(fields) > 9 && fields[3] == "0A" { // TCP_LISTEN
				listen[fields[9]] = true
			}
		}
	}
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	n := 0
	for _, e := range ents {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil {
			continue // closed meanwhile
		}
		if inode, ok := strings.CutPrefix(target, "socket:["); ok && listen[strings.TrimSuffix(inode, "]")] {
			n++
		}
	}
	return n
}

// An Init that fails after listening (here the other rank never comes)
// closes the listener: nothing is left listening.
func TestMetricsClosedWhenInitFails(t *testing.T) {
	base := listeningSockets(t)
	store := bootstrap.NewLocalStore()
	defer store.Close()
	o := localOptions(store, jobID(t), 0, 2, TransportShm)
	o.MetricsAddr = "127.0.0.1:0"
	o.RendezvousTimeout = 500 * time.Millisecond
	c, err := Init(bounded(t), o)
	require.Nil(t, c)
	require.Error(t, err)
	require.Equal(t, base, listeningSockets(t))
}
