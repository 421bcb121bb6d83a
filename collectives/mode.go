package collectives

import (
	"fmt"
	"os"
	"strings"
)

// EnvReproducible is the environment variable that turns on
// Options.Reproducible when set to 1 (or true); OptionsFromEnv reads it.
const EnvReproducible = "RDMACELL_REPRODUCIBLE"

// mode is how a reduction combines: the algorithm's own order (the
// default), the fixed order of Options.Reproducible, or the exact sums of
// Options.Exact. It is part of the fingerprint, so ranks whose modes
// differ are told so rather than left with different bits.
type mode uint8

const (
	modeDefault mode = iota
	modeReproducible
	modeExact
)

var modeNames = [...]string{"default", "reproducible", "exact"}

func (m mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return "mode(" + itoa(int(m)) + ")"
}

// groupMode is the mode Options ask for.
func groupMode(opts Options) mode {
	switch {
	case opts.Exact:
		return modeExact
	case opts.Reproducible:
		return modeReproducible
	}
	return modeDefault
}

// reproducibleFromEnv reads EnvReproducible: unset, "" and 0 are off, 1
// is on; anything else is an error naming the variable.
func reproducibleFromEnv() (bool, error) {
	v, ok := os.LookupEnv(EnvReproducible)
	switch {
	case !ok || v == "" || v == "0" || strings.EqualFold(v, "false"):
		return false, nil
	case v == "1" || strings.EqualFold(v, "true"):
		return true, nil
	}
	return false, fmt.Errorf("environment variable %s=%q: want 1 or 0", EnvReproducible, v)
}

// opMode is the mode of one reduction in a group of mode m. Exact sums
// only the float32 and float64 Sum and Avg; the other combinations are
// exact already (integers, Min, Max) or have no exact form kept here
// (Prod, the 16-bit floats), and run in the reproducible order.
func opMode(m mode, d dtype, op Op) mode {
	if m == modeExact && !((d == dtFloat32 || d == dtFloat64) && (op == Sum || op == Avg)) {
		return modeReproducible
	}
	return m
}
