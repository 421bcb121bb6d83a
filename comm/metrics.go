package comm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rdmacell/rdmacell/flight"
)

// Metrics. With Options.MetricsAddr set (RDMACELL_METRICS_ADDR, or
// cellrun's --metrics-port), a rank serves Prometheus text on /metrics at
// that address. The numbers are Stats, read when a scrape asks for them:
// the operations and the transport only keep the counters Stats reads,
// so serving metrics adds nothing to their paths, and a rank without the
// option opens no socket for them. Every metric has the label rank (in
// the job); the others are peer (a rank of the job), link ("control" or
// "bulk"), path (its index in the link), op and size (an operation and
// its size class, see flight.SizeClassName). The Go runtime's metrics
// (go_*) are served beside them. The process collector (process_*) is
// not, and the text is not compressed: each cost a scrape more CPU than
// the rank's own metrics (bench/RESULTS.md, "Seeing inside a job"), which a rank spinning on
// a processor it shares pays for; a node exporter has the process's
// numbers.

// metricsShutdown bounds how long Close waits for scrapes under way.
const metricsShutdown = time.Second

// metricsServer is a rank's metrics endpoint.
type metricsServer struct {
	ln   net.Listener
	srv  *http.Server
	done chan struct{} // closed when Serve has returned
}

// listenMetrics listens on Options.MetricsAddr, if set; serveMetrics
// starts answering once the world is complete. Listening first makes an
// address in use an error of Init before the rank joins the job.
func (w *world) listenMetrics() error {
	if w.opts.MetricsAddr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", w.opts.MetricsAddr)
	if err != nil {
		return fmt.Errorf("serve metrics on %q (MetricsAddr, %s): %w", w.opts.MetricsAddr, EnvMetricsAddr, err)
	}
	w.metrics = &metricsServer{ln: ln}
	return nil
}

// serveMetrics starts serving /metrics on the listener of listenMetrics.
func (w *world) serveMetrics() {
	m := w.metrics
	if m == nil {
		return
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(newStatsCollector(w), collectors.NewGoCollector())
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{DisableCompression: true}))
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	m.done = make(chan struct{})
	go func() {
		defer close(m.done)
		if err := m.srv.Serve(m.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			w.log.Warn("comm: metrics endpoint stopped", "addr", m.ln.Addr().String(), "err", err)
		}
	}()
	w.log.Debug("serving metrics", "addr", m.ln.Addr().String())
}

// stopMetrics stops the endpoint: scrapes under way get metricsShutdown
// to finish, then their connections are closed.
func (w *world) stopMetrics() {
	m := w.metrics
	if m == nil {
		return
	}
	if m.srv == nil {
		_ = m.ln.Close()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), metricsShutdown)
	defer cancel()
	if err := m.srv.Shutdown(ctx); err != nil {
		_ = m.srv.Close()
	}
	<-m.done
}

// MetricsAddr is the address this process serves its metrics on, with the
// port the system chose for ":0"; "" when Options.MetricsAddr is not set.
func (c *Comm) MetricsAddr() string {
	if m := c.w.metrics; m != nil {
		return m.ln.Addr().String()
	}
	return ""
}

// metric is one metric read from a T of Stats: its description, its
// type and how to read its value.
type metric[T any] struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(*T) float64
}

func counter[T any](name, help string, labels []string, f func(*T) float64) metric[T] {
	return metric[T]{prometheus.NewDesc("rdmacell_"+name, help, labels, nil), prometheus.CounterValue, f}
}

func gauge[T any](name, help string, labels []string, f func(*T) float64) metric[T] {
	return metric[T]{prometheus.NewDesc("rdmacell_"+name, help, labels, nil), prometheus.GaugeValue, f}
}

func emit[T any](ch chan<- prometheus.Metric, ms []metric[T], v *T, labels ...string) {
	for _, m := range ms {
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, m.value(v), labels...)
	}
}

// f64u, f64i, f64d and f64b convert the fields of Stats to metric values.
func f64u(v uint64) float64        { return float64(v) }
func f64i(v int) float64           { return float64(v) }
func f64d(d time.Duration) float64 { return d.Seconds() }

func f64b(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// The label sets of the metrics.
var (
	opLabels      = []string{"rank", "op", "size"}
	peerLabels    = []string{"rank", "peer"}
	linkLabels    = []string{"rank", "peer", "link"}
	pathLabels    = []string{"rank", "peer", "link", "path"}
	trafficLabels = []string{"rank", "path"}
	rankLabels    = []string{"rank"}
)

var (
	opDuration = prometheus.NewDesc("rdmacell_op_duration_seconds",
		"Latency of the operations the flight recorder counted, by operation and size class.", opLabels, nil)
	peerInfo = prometheus.NewDesc("rdmacell_peer_info",
		"1 for every rank of the job, labelled with its host and the transport this rank reaches it by.",
		[]string{"rank", "peer", "host", "transport"}, nil)
	pathState = prometheus.NewDesc("rdmacell_path_state",
		"1 for the state the path is in (up, resetting, down, dead), 0 for the others.",
		append(pathLabels, "state"), nil)
	memoryBytes = prometheus.NewDesc("rdmacell_memory_registered_bytes",
		"Registered memory in use: kind user is what Alloc handed out, registered the program's own memory that Register registered, internal the communicator's.",
		[]string{"rank", "kind"}, nil)
	memoryRegions = prometheus.NewDesc("rdmacell_memory_registered_regions",
		"Registered regions in use, by kind as rdmacell_memory_registered_bytes.", []string{"rank", "kind"}, nil)
	hostSegBytes = prometheus.NewDesc("rdmacell_memory_host_segment_bytes",
		"Host memory this process shares with the other ranks of its host (the collectives' segments).", []string{"rank"}, nil)
	hostSegs = prometheus.NewDesc("rdmacell_memory_host_segments",
		"Segments of host memory this process has mapped.", []string{"rank"}, nil)
	stagingBytes = prometheus.NewDesc("rdmacell_staging_bytes",
		"Memory of the staging buffers of a direction (send, receive), 0 until first used.", []string{"rank", "dir"}, nil)
	stagingInUse = prometheus.NewDesc("rdmacell_staging_buffers_in_use",
		"Staging buffers of a direction that hold a chunk now.", []string{"rank", "dir"}, nil)
)

var opFailures = counter("op_failures_total", "Operations that failed, by operation and size class.", opLabels,
	func(o *OpStats) float64 { return f64u(o.Failed) })

var peerMetrics = []metric[PeerStats]{
	gauge("peer_connected", "1 once the links to the peer are up.", peerLabels,
		func(p *PeerStats) float64 { return f64b(p.Connected) }),
	gauge("peer_failed", "1 once operations with the peer fail.", peerLabels,
		func(p *PeerStats) float64 { return f64b(p.Err != "") }),
	counter("peer_sent_bytes_total", "Bytes of the messages sent to the peer that completed.", peerLabels,
		func(p *PeerStats) float64 { return f64u(p.SentBytes) }),
	counter("peer_sent_messages_total", "Messages sent to the peer that completed.", peerLabels,
		func(p *PeerStats) float64 { return f64u(p.SentMessages) }),
	counter("peer_received_bytes_total", "Bytes of the messages received from the peer.", peerLabels,
		func(p *PeerStats) float64 { return f64u(p.ReceivedBytes) }),
	counter("peer_received_messages_total", "Messages received from the peer.", peerLabels,
		func(p *PeerStats) float64 { return f64u(p.ReceivedMessages) }),
	gauge("peer_live_handles", "Sends and receives with the peer in progress.", peerLabels,
		func(p *PeerStats) float64 { return f64i(p.LiveHandles) }),
	gauge("peer_control_pending", "Control messages to the peer waiting for a control slot.", peerLabels,
		func(p *PeerStats) float64 { return f64i(p.ControlPending) }),
}

var linkMetrics = []metric[LinkStats]{
	gauge("link_ranges_in_flight", "Ranges outstanding on the link, queued ones included.", linkLabels,
		func(l *LinkStats) float64 { return f64i(l.InFlight) }),
	counter("link_cells_reposted_total", "Cells posted again after their path was given up.", linkLabels,
		func(l *LinkStats) float64 { return f64u(l.CellsReposted) }),
	counter("link_tokens_total", "Tokens that acknowledged a cell.", linkLabels,
		func(l *LinkStats) float64 { return f64u(l.TokensAccepted) }),
	counter("link_tokens_stale_total", "Tokens that matched no cell outstanding.", linkLabels,
		func(l *LinkStats) float64 { return f64u(l.TokensStale) }),
	counter("link_tokens_sent_total", "Tokens sent for cells received.", linkLabels,
		func(l *LinkStats) float64 { return f64u(l.TokensSent) }),
	counter("link_duplicates_total", "Cells received again (a re-post whose original landed too).", linkLabels,
		func(l *LinkStats) float64 { return f64u(l.Duplicates) }),
	counter("link_nacks_sent_total", "Cells refused.", linkLabels,
		func(l *LinkStats) float64 { return f64u(l.NACKsSent) }),
	counter("link_ranges_sent_total", "Ranges sent.", linkLabels,
		func(l *LinkStats) float64 { return f64u(l.RangesSent) }),
	counter("link_ranges_received_total", "Ranges received.", linkLabels,
		func(l *LinkStats) float64 { return f64u(l.RangesReceived) }),
	counter("link_ranges_failed_total", "Ranges that failed.", linkLabels,
		func(l *LinkStats) float64 { return f64u(l.RangesFailed) }),
	counter("link_give_ups_total", "Paths given up, on a soft timeout or an error.", linkLabels,
		func(l *LinkStats) float64 { return f64u(l.GiveUps) }),
	counter("link_readmissions_total", "Paths reset and usable again.", linkLabels,
		func(l *LinkStats) float64 { return f64u(l.Readmissions) }),
	counter("link_resets_started_total", "Path resets begun.", linkLabels,
		func(l *LinkStats) float64 { return f64u(l.ResetsStarted) }),
	counter("link_resets_total", "Path resets completed with the peer.", linkLabels,
		func(l *LinkStats) float64 { return f64u(l.Resets) }),
	counter("link_resets_again_total", "Path resets that failed part way and started over.", linkLabels,
		func(l *LinkStats) float64 { return f64u(l.ResetsAgain) }),
	counter("link_dead_paths_total", "Paths closed for good.", linkLabels,
		func(l *LinkStats) float64 { return f64u(l.DeadPaths) }),
	counter("link_holds_total", "Ranges held at the receiver before a cell of theirs went again.", linkLabels,
		func(l *LinkStats) float64 { return f64u(l.Holds) }),
	counter("link_keepalives_total", "Rounds of probes sent while nothing completed.", linkLabels,
		func(l *LinkStats) float64 { return f64u(l.Keepalives) }),
}

var pathMetrics = []metric[PathStats]{
	counter("path_cells_total", "Cells posted on the path, re-posts included.", pathLabels,
		func(p *PathStats) float64 { return f64u(p.CellsPosted) }),
	counter("path_bytes_total", "Bytes posted on the path, re-posts included.", pathLabels,
		func(p *PathStats) float64 { return f64u(p.BytesPosted) }),
	counter("path_tokens_total", "Tokens that acknowledged cells posted on the path.", pathLabels,
		func(p *PathStats) float64 { return f64u(p.Tokens) }),
	counter("path_give_ups_total", "Times the path was given up (error, peer's request, no progress while demoted).", pathLabels,
		func(p *PathStats) float64 { return f64u(p.GiveUps) }),
	counter("path_soft_timeouts_total", "Times the path was demoted because a cell waited past T_soft.", pathLabels,
		func(p *PathStats) float64 { return f64u(p.SoftTimeouts) }),
	counter("path_promotions_total", "Times the path, demoted, was up again once what it held had landed.", pathLabels,
		func(p *PathStats) float64 { return f64u(p.Promotions) }),
	counter("path_reprobes_total", "Times the path, left without cells on measurements gone stale, was probed again.", pathLabels,
		func(p *PathStats) float64 { return f64u(p.Reprobes) }),
	counter("path_resets_total", "Resets of the path's queue pairs, completed or started over.", pathLabels,
		func(p *PathStats) float64 { return f64u(p.Resets) }),
	gauge("path_rtt_seconds", "Smoothed round-trip time of the path.", pathLabels,
		func(p *PathStats) float64 { return f64d(p.SRTT) }),
	gauge("path_rtt_deviation_seconds", "Mean deviation of the path's round-trip time.", pathLabels,
		func(p *PathStats) float64 { return f64d(p.RTTVar) }),
	gauge("path_soft_timeout_seconds", "T_soft of the path: how long a cell may wait for its token until the path's lateness is measured.", pathLabels,
		func(p *PathStats) float64 { return f64d(p.SoftTimeout) }),
	gauge("path_late_margin_seconds", "How long after its expected token a cell may wait before the path is demoted; 0 until measured.", pathLabels,
		func(p *PathStats) float64 { return f64d(p.LateMargin) }),
	gauge("path_delay_seconds", "Round-trip time of the path without the time spent behind earlier bytes.", pathLabels,
		func(p *PathStats) float64 { return f64d(p.Delay) }),
	gauge("path_rtt_samples", "RTT samples since the path was last admitted.", pathLabels,
		func(p *PathStats) float64 { return f64i(p.Samples) }),
	gauge("path_bandwidth_bytes_per_second", "Measured delivery rate of the path, 0 until measured.", pathLabels,
		func(p *PathStats) float64 { return float64(p.Bandwidth) }),
	gauge("path_outstanding_cells", "Cells posted on the path and not yet acknowledged.", pathLabels,
		func(p *PathStats) float64 { return f64i(p.OutstandingCells) }),
	gauge("path_outstanding_bytes", "Bytes posted on the path and not yet acknowledged.", pathLabels,
		func(p *PathStats) float64 { return float64(p.OutstandingBytes) }),
	gauge("path_credits", "Cells the path may take now.", pathLabels,
		func(p *PathStats) float64 { return f64i(p.Credits) }),
}

// pathStates are the values of the state label of rdmacell_path_state.
var pathStates = [...]string{PathUp, PathResetting, PathDown, PathDead}

var trafficMetrics = []metric[TrafficStats]{
	counter("traffic_reposts_total", "Cells posted again, over every connection of the process.", rankLabels,
		func(t *TrafficStats) float64 { return f64u(t.Reposts) }),
	counter("traffic_resets_started_total", "Path resets begun, over every connection of the process.", rankLabels,
		func(t *TrafficStats) float64 { return f64u(t.ResetsStarted) }),
	counter("traffic_resets_total", "Path resets completed, over every connection of the process.", rankLabels,
		func(t *TrafficStats) float64 { return f64u(t.Resets) }),
}

var (
	trafficCells = prometheus.NewDesc("rdmacell_traffic_cells_total",
		"Cells posted on path number path of any connection of the process.", trafficLabels, nil)
	trafficBytes = prometheus.NewDesc("rdmacell_traffic_bytes_total",
		"Bytes posted on path number path of any connection of the process.", trafficLabels, nil)
)

// opBounds are the upper bounds of the latency buckets in seconds: the
// recorder's, but its last, which is open-ended (the +Inf bucket).
var opBounds = func() []float64 {
	b := make([]float64, flight.NumBuckets-1)
	for i := range b {
		b[i] = flight.BucketBound(i).Seconds()
	}
	return b
}()

// statsCollector serves Stats of a world to Prometheus.
type statsCollector struct{ w *world }

func newStatsCollector(w *world) prometheus.Collector { return statsCollector{w} }

// Describe sends the description of every metric the collector serves.
func (sc statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{opDuration, opFailures.desc, peerInfo, pathState,
		memoryBytes, memoryRegions, hostSegBytes, hostSegs, stagingBytes, stagingInUse, trafficCells, trafficBytes} {
		ch <- d
	}
	for _, m := range peerMetrics {
		ch <- m.desc
	}
	for _, m := range linkMetrics {
		ch <- m.desc
	}
	for _, m := range pathMetrics {
		ch <- m.desc
	}
	for _, m := range trafficMetrics {
		ch <- m.desc
	}
}

// Collect reads Stats and sends every metric.
func (sc statsCollector) Collect(ch chan<- prometheus.Metric) {
	s := sc.w.comm.Stats()
	rank := strconv.Itoa(s.Rank)
	for i := range s.Ops {
		o := &s.Ops[i]
		cum := make(map[float64]uint64, len(opBounds))
		var k uint64
		for b, bound := range opBounds {
			k += o.Buckets[b]
			cum[bound] = k
		}
		ch <- prometheus.MustNewConstHistogram(opDuration, o.Count, o.Sum.Seconds(), cum, rank, o.Op, o.Size)
		ch <- prometheus.MustNewConstMetric(opFailures.desc, opFailures.kind, opFailures.value(o), rank, o.Op, o.Size)
	}
	for i := range s.Peers {
		p := &s.Peers[i]
		peer := strconv.Itoa(p.Rank)
		ch <- prometheus.MustNewConstMetric(peerInfo, prometheus.GaugeValue, 1, rank, peer, p.Host, p.Transport)
		emit(ch, peerMetrics, p, rank, peer)
		for j := range p.Links {
			l := &p.Links[j]
			emit(ch, linkMetrics, l, rank, peer, l.Name)
			for q := range l.Paths {
				pa := &l.Paths[q]
				path := strconv.Itoa(pa.Index)
				emit(ch, pathMetrics, pa, rank, peer, l.Name, path)
				for _, st := range pathStates {
					ch <- prometheus.MustNewConstMetric(pathState, prometheus.GaugeValue, f64b(pa.State == st),
						rank, peer, l.Name, path, st)
				}
			}
		}
	}
	for i := range s.Traffic.PathCells {
		path := strconv.Itoa(i)
		ch <- prometheus.MustNewConstMetric(trafficCells, prometheus.CounterValue, f64u(s.Traffic.PathCells[i]), rank, path)
		ch <- prometheus.MustNewConstMetric(trafficBytes, prometheus.CounterValue, f64u(s.Traffic.PathBytes[i]), rank, path)
	}
	emit(ch, trafficMetrics, &s.Traffic, rank)
	mem := &s.Memory
	for _, k := range []struct {
		kind    string
		bytes   int64
		regions int
	}{{"user", mem.UserBytes, mem.UserRegions}, {"registered", mem.RegisteredBytes, mem.RegisteredRegions}, {"internal", mem.InternalBytes, mem.InternalRegions}} {
		ch <- prometheus.MustNewConstMetric(memoryBytes, prometheus.GaugeValue, float64(k.bytes), rank, k.kind)
		ch <- prometheus.MustNewConstMetric(memoryRegions, prometheus.GaugeValue, f64i(k.regions), rank, k.kind)
	}
	ch <- prometheus.MustNewConstMetric(hostSegBytes, prometheus.GaugeValue, float64(mem.HostSegmentBytes), rank)
	ch <- prometheus.MustNewConstMetric(hostSegs, prometheus.GaugeValue, f64i(mem.HostSegments), rank)
	for _, st := range []struct {
		dir string
		s   StagingStats
	}{{"send", mem.SendStaging}, {"receive", mem.ReceiveStaging}} {
		ch <- prometheus.MustNewConstMetric(stagingBytes, prometheus.GaugeValue, float64(st.s.Bytes), rank, st.dir)
		ch <- prometheus.MustNewConstMetric(stagingInUse, prometheus.GaugeValue, f64i(st.s.InUse), rank, st.dir)
	}
}
