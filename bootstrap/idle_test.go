package bootstrap

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// renewalsPerTTL is how many renewals span about one lease TTL: etcd's
// client renews every third of it.
const renewalsPerTTL = 3

// waitRenewals waits until every job has renewed its lease n more times
// than in since, and returns their activity then.
func waitRenewals(t *testing.T, jobs []*Job, since []Activity, n uint64) []Activity {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	now := make([]Activity, len(jobs))
	for r, j := range jobs {
		for now[r] = j.Activity(); now[r].Renewals < since[r].Renewals+n; now[r] = j.Activity() {
			require.True(t, time.Now().Before(deadline), "rank %d: lease renewed %d times, want %d more than %d",
				r, now[r].Renewals, n, since[r].Renewals)
			time.Sleep(testTTL / 10)
		}
	}
	return now
}

// Once a job has formed and nothing in it changes, the only thing that
// wakes a rank's background goroutines is its lease renewal: the watch on
// the job says nothing, and nothing polls etcd. The idle window is counted
// in renewals, not in time, so the test needs no timing threshold.
func TestIdleJobOnlyRenews(t *testing.T) {
	eachStore(t, func(t *testing.T, m meeting) {
		const world = 3
		jobs, errs := runRanks(t, m, "idle", world, exchangeAll)
		for r, err := range errs {
			require.NoError(t, err, "rank %d", r)
		}

		// Every rank has heard of every change before the window opens.
		head := m.revision(t)
		deadline := time.Now().Add(testTimeout)
		for r, j := range jobs {
			for j.activity.applied.Load() < head {
				require.True(t, time.Now().Before(deadline), "rank %d: follows the job up to revision %d, want %d",
					r, j.activity.applied.Load(), head)
				time.Sleep(time.Millisecond)
			}
		}

		before := make([]Activity, world)
		for r, j := range jobs {
			before[r] = j.Activity()
		}
		after := waitRenewals(t, jobs, before, renewalsPerTTL)
		for r := range jobs {
			t.Logf("rank %d over the idle window: %+v", r, Activity{
				Renewals:       after[r].Renewals - before[r].Renewals,
				WatchResponses: after[r].WatchResponses - before[r].WatchResponses,
				WatchRestarts:  after[r].WatchRestarts - before[r].WatchRestarts,
			})
			assert.Equal(t, before[r].WatchResponses, after[r].WatchResponses, "rank %d: the watch woke up", r)
			assert.Equal(t, before[r].WatchRestarts, after[r].WatchRestarts, "rank %d: the watch was restarted", r)
			assert.Zero(t, after[r].WatchRestarts, "rank %d: the watch was restarted", r)
		}
	})
}
