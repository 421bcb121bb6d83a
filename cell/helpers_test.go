package cell_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/cell/celltest"
	"github.com/rdmacell/rdmacell/verbs"
)

// The scenarios run on celltest's fabric; these names keep them short.
type (
	fabric     = celltest.Fabric
	fabricOpts = celltest.Options
	msg        = celltest.Msg
	verdict    = celltest.Verdict
)

const (
	us = celltest.Microsecond
	ms = celltest.Millisecond
)

func defaultOpts(paths int) fabricOpts { return celltest.DefaultOptions(paths) }

// traceTail is how many lines of its trace a failed fabric test prints:
// the end of a history is where it went wrong.
const traceTail = 4000

// newTestFabric returns a fabric that prints its trace if the test
// fails.
func newTestFabric(t *testing.T, o fabricOpts) *fabric {
	t.Helper()
	f, err := celltest.New(o)
	require.NoError(t, err)
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		from := max(f.Trace.Len()-traceTail, 0)
		t.Logf("trace of the failed run (%d lines left out before these):\n%s", from, f.Trace.Since(from))
	})
	return f
}

func durNS(ns int64) time.Duration { return time.Duration(ns) }

func verbsWC() verbs.WC { return verbs.WC{Status: verbs.StatusSuccess} }
