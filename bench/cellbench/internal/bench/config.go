package bench

import (
	"fmt"
	"time"

	"github.com/rdmacell/rdmacell/collectives"
)

// Config is one cellbench run.
type Config struct {
	// Collective is one of Collectives' names, e.g. "allreduce".
	Collective string
	// MinBytes and MaxBytes bound the message sizes; Factor > 1 multiplies
	// the size at each step, otherwise Step is added.
	MinBytes, MaxBytes int64
	Factor             float64
	Step               int64
	// Iters is the number of calls per repetition (the least, with
	// RepTime), Warmup the number of untimed calls before them.
	Iters, Warmup int
	// Reps is the number of timed repetitions; rows report their median.
	Reps int
	// RepTime, when positive, raises Iters per size so that a repetition
	// lasts about this long, as the reference benchmarks calibrate.
	RepTime time.Duration
	// Check verifies the result of one call of each form before timing.
	Check bool
	// Type is the element type, Op the reduction, Root the root rank.
	Type string
	Op   string
	Root int
	// Algorithm forces a collective algorithm (Auto lets the library
	// choose).
	Algorithm collectives.Algorithm
	// Chunk is the collectives' pipelining unit in bytes (0: theirs).
	Chunk int
	// Reproducible and Exact are the collectives' reduction modes.
	Reproducible, Exact bool
	// Policy and Paths override the launcher's path policy and number of
	// paths per peer; empty and 0 keep them.
	Policy string
	Paths  int
	// Label names this configuration in the CSV output; Run is its run
	// index there.
	Label string
	Run   int
	// JSONFile and CSVFile, when set, receive the rows (rank 0 writes).
	JSONFile, CSVFile string
	// CPUProfile, when set, is where each rank writes a CPU profile, with
	// its rank appended: FILE.0, FILE.1, ...
	CPUProfile string
	// Idle, when positive, measures the CPU the communicator uses while
	// idle for this long after the sizes.
	Idle time.Duration
	// PathsReport prints, at the end, the counters of every path of every
	// rank's connections (rank 0 prints them all).
	PathsReport bool
}

// validate checks what can be checked before the communicator exists.
func (c *Config) validate() error {
	switch {
	case collectiveByName(c.Collective) == nil:
		return fmt.Errorf("unknown collective %q: want one of %s", c.Collective, collectiveNames())
	case c.MinBytes < 0 || c.MaxBytes < c.MinBytes:
		return fmt.Errorf("sizes: want 0 <= -b %d <= -e %d", c.MinBytes, c.MaxBytes)
	case c.Factor <= 1 && c.Step <= 0 && c.MaxBytes > c.MinBytes:
		return fmt.Errorf("want -f above 1 or -i above 0 to go from -b to -e")
	case c.Iters < 1 || c.Warmup < 0 || c.Reps < 1:
		return fmt.Errorf("want -n >= 1, -w >= 0 and --reps >= 1")
	}
	if _, err := typeByName(c.Type); err != nil {
		return err
	}
	if _, err := opByName(c.Op); err != nil {
		return err
	}
	return nil
}
