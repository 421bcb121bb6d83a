package comm_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmacell/rdmacell/bootstrap"
	"github.com/rdmacell/rdmacell/collectives"
	"github.com/rdmacell/rdmacell/comm"
)

// BenchmarkAllReduceMetrics measures the cost of the metrics endpoint on
// the 8-byte AllReduce of two ranks of this process, in three forms:
// "off" serves no metrics, "idle" serves them and is not scraped,
// "scraped" serves them and both of its ranks are scraped every 100 ms
// while its operations run, as a Prometheus server would. It runs blocks
// of half a second of back-to-back operations, off, idle, scraped, off,
// ..., each on a job of its own, so that the machine's drift and where a
// job's memory and goroutines land fall on all three alike, and reports
// for each form the median and the range of the blocks' time per
// operation, and the median time a scrape took (ns/op is the median of
// "scraped"):
//
//	go test -run '^$' -bench AllReduceMetrics -v ./comm/
//
// Over shm the AllReduce goes through the memory the ranks share, over
// tcp through cell connections.
func BenchmarkAllReduceMetrics(b *testing.B) {
	for _, tr := range []comm.Transport{comm.TransportShm, comm.TransportTCP} {
		b.Run(string(tr), func(b *testing.B) {
			names := []string{"off", "idle", "scraped"}
			per := make([][]float64, len(names))
			var scrapes []float64
			for range b.N {
				for range blockRounds {
					for i, name := range names {
						// A job of its own for every block: where its
						// memory and goroutines land differs from job
						// to job, and must fall on all three alike.
						j := startBenchJob(b, tr, name != "off")
						j.run(b, 100) // connections, the shared segment, warm caches
						t, sc := j.block(b, name == "scraped")
						j.close()
						per[i] = append(per[i], t)
						scrapes = append(scrapes, sc...)
					}
				}
			}
			for k := range per[0] {
				b.Logf("block %2d: off %9.0f, idle %9.0f, scraped %9.0f ns/op", k, per[0][k], per[1][k], per[2][k])
			}
			for i, name := range names {
				b.ReportMetric(median(per[i]), name+"-ns/op")
				b.ReportMetric(slices.Min(per[i]), name+"-min-ns/op")
				b.ReportMetric(slices.Max(per[i]), name+"-max-ns/op")
			}
			b.ReportMetric(median(per[2]), "ns/op")
			b.ReportMetric(median(per[2])/median(per[0]), "scraped/off")
			b.ReportMetric(median(per[1])/median(per[0]), "idle/off")
			b.ReportMetric(float64(len(scrapes)), "scrapes")
			if len(scrapes) > 0 {
				b.ReportMetric(median(scrapes)/1e3, "scrape-us")
			}
		})
	}
}

// Blocks: their number per job and how long each lasts.
const (
	blockRounds = 15
	blockTime   = 500 * time.Millisecond
)

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// benchJob is a job of two ranks of this process, each with a group.
type benchJob struct {
	comms  []*comm.Comm
	groups []*collectives.Group
	bufs   [][]float32
	ctx    context.Context
	close  func()
}

var benchJobs atomic.Int64

func startBenchJob(b *testing.B, tr comm.Transport, metrics bool) *benchJob {
	const world = 2
	store := bootstrap.NewLocalStore()
	name := fmt.Sprintf("metrics-bench-%d-%d", os.Getpid(), benchJobs.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	j := &benchJob{comms: make([]*comm.Comm, world), groups: make([]*collectives.Group, world), ctx: ctx}
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r := range world {
		j.bufs = append(j.bufs, make([]float32, 2))
		wg.Go(func() {
			o := comm.Options{Rank: r, WorldSize: world, Job: name, Store: store, Transport: tr,
				Logger: slog.New(slog.DiscardHandler)}
			if metrics {
				o.MetricsAddr = "127.0.0.1:0"
			}
			if j.comms[r], errs[r] = comm.Init(ctx, o); errs[r] != nil {
				return
			}
			j.groups[r], errs[r] = collectives.New(j.comms[r].P2P(), collectives.Options{})
		})
	}
	wg.Wait()
	var once sync.Once
	j.close = func() {
		once.Do(func() {
			for _, g := range j.groups {
				if g != nil {
					_ = g.Close()
				}
			}
			var wg sync.WaitGroup
			for _, c := range j.comms {
				if c != nil {
					wg.Go(func() { _ = c.Close() })
				}
			}
			wg.Wait()
			cancel()
			_ = store.Close()
		})
	}
	b.Cleanup(j.close)
	for r, err := range errs {
		if err != nil {
			b.Fatalf("rank %d: %v", r, err)
		}
	}
	return j
}

// run does n AllReduces on every rank.
func (j *benchJob) run(b *testing.B, n int) {
	errs := make([]error, len(j.groups))
	var wg sync.WaitGroup
	for r, g := range j.groups {
		wg.Go(func() {
			for range n {
				if err := collectives.AllReduce(j.ctx, g, j.bufs[r], j.bufs[r], collectives.Sum); err != nil {
					errs[r] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			b.Fatalf("rank %d: %v", r, err)
		}
	}
}

// block runs AllReduces for blockTime, scraping every rank's metrics
// every 100 ms meanwhile if scrape is set, and returns the time per
// operation and how long each scrape took, in nanoseconds.
func (j *benchJob) block(b *testing.B, scrape bool) (float64, []float64) {
	var scrapes []float64
	stop := make(chan struct{})
	var scraper sync.WaitGroup
	if scrape {
		cl := &http.Client{Timeout: 10 * time.Second}
		defer cl.CloseIdleConnections()
		scraper.Go(func() {
			t := time.NewTicker(100 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				for _, c := range j.comms {
					t0 := time.Now()
					resp, err := cl.Get("http://" + c.MetricsAddr() + "/metrics")
					if err != nil {
						b.Errorf("scrape %s: %v", c.MetricsAddr(), err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					scrapes = append(scrapes, float64(time.Since(t0).Nanoseconds()))
				}
			}
		})
	}
	n, d := j.runFor(b, blockTime)
	close(stop)
	scraper.Wait()
	return float64(d.Nanoseconds()) / float64(n), scrapes
}

// runFor does AllReduces on every rank until d has passed and returns
// how many and how long they took. Rank 0 looks at the clock every 64
// operations; once d has passed it sets the limit to the operation it is
// about to start, plus one. No rank can have started a later one (each
// needs rank 0's part of the one before), so every rank stops at the
// same count.
func (j *benchJob) runFor(b *testing.B, d time.Duration) (int, time.Duration) {
	var limit atomic.Int64
	limit.Store(math.MaxInt64)
	counts := make([]int, len(j.groups))
	errs := make([]error, len(j.groups))
	var wg sync.WaitGroup
	start := time.Now()
	for r, g := range j.groups {
		wg.Go(func() {
			for i := 0; ; i++ {
				if r == 0 && i%64 == 0 && time.Since(start) >= d {
					limit.CompareAndSwap(math.MaxInt64, int64(i+1))
				}
				if int64(i) >= limit.Load() {
					counts[r] = i
					return
				}
				if err := collectives.AllReduce(j.ctx, g, j.bufs[r], j.bufs[r], collectives.Sum); err != nil {
					errs[r] = err
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	for r, err := range errs {
		if err != nil {
			b.Fatalf("rank %d: %v", r, err)
		}
	}
	for r, n := range counts {
		if n != counts[0] {
			b.Fatalf("rank %d did %d operations, rank 0 %d", r, n, counts[0])
		}
	}
	return counts[0], elapsed
}
