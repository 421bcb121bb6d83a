package launcher

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProgramDirectory gives cellrun a directory holding a Go main
// package: it is built once, run by every rank, and the build removed.
func TestProgramDirectory(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	p, code := runCellrun(t, "-n", "2", "./testdata/hello")
	require.Equal(t, 0, code, "stderr:\n%s", strings.Join(p.stderr.all(), "\n"))
	assert.ElementsMatch(t, []string{"[0] hello from rank 0 of 2", "[1] hello from rank 1 of 2"}, p.stdout.all())
	assert.Empty(t, p.stderr.all())
	p.assertClean(ctx, t, 0)
}

// TestProgramNotRunnable names what is wrong with a PROGRAM that cannot
// run, before any rank starts.
func TestProgramNotRunnable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		program string
		want    string
	}{
		{"not a main package", "./testdata/notmain", `PROGRAM directory "./testdata/notmain" holds package notmain, want a main package`},
		{"no Go files", "./testdata", `PROGRAM directory "./testdata": go list: exit status 1: `},
		{"missing", "./testdata/no-such-program", `PROGRAM "./testdata/no-such-program": `},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			p, code := runCellrun(t, "-n", "2", tt.program)
			assert.Equal(t, ExitFailure, code)
			stderr := p.stderr.all()
			require.NotEmpty(t, stderr)
			assert.True(t, strings.HasPrefix(stderr[0], "cellrun: "+tt.want), "%q", stderr)
			assert.Empty(t, p.stdout.all())
			p.assertClean(ctx, t, 0)
		})
	}
}
