package cell_test

import (
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/rdmacell/rdmacell/cell/celltest"
)

// The protocol scenarios of testdata/*.txt, run by celltest.Env; each
// file is its own scenario, with a fresh environment. Regenerate their
// golden output with `go test -run TestScripts -rewrite` and read the
// diff: every fact a scenario asserts is either in that output or an
// explicit check command, which fails the test whatever the output says.
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		env := celltest.NewEnv()
		datadriven.RunTest(t, path, env.Handle)
	})
}
