package launcher

import (
	"testing"

	"github.com/rdmacell/rdmacell/bootstrap"
	"github.com/stretchr/testify/assert"
)

// TestDeathWatch finds a rank's report of another rank's death in its
// output, as a program prints the error (wrapped in its own words), and
// only for its own job.
func TestDeathWatch(t *testing.T) {
	pattern, marker := deathPattern("job-1")
	w := &deathWatch{pattern: pattern, marker: marker}
	report := (&bootstrap.RankDeadError{Job: "job-1", Rank: 12, Host: "node-a.example", PID: 4242}).Error()

	got, ok := w.scan([]byte("train: allreduce step 7: comm: " + report + "\n"))
	assert.True(t, ok)
	assert.Equal(t, deathReport{rank: 12, host: "node-a.example", pid: 4242}, got)

	other := (&bootstrap.RankDeadError{Job: "job-2", Rank: 3, Host: "h", PID: 1}).Error()
	_, ok = w.scan([]byte(other))
	assert.False(t, ok, "another job's report")
	_, ok = w.scan([]byte("rank 3 died of boredom"))
	assert.False(t, ok)
	_, ok = (*deathWatch)(nil).scan([]byte(report))
	assert.False(t, ok)
}
