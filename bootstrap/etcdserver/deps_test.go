package etcdserver

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// serverOnly are packages (or prefixes of packages) that only an etcd
// server needs: this package, etcd's server with its raft and bbolt, and
// the OpenTelemetry SDK it exports traces with.
var serverOnly = []string{
	"github.com/rdmacell/rdmacell/bootstrap/etcdserver",
	"go.etcd.io/etcd/server/",
	"go.etcd.io/raft/",
	"go.etcd.io/bbolt",
	"go.opentelemetry.io/otel/sdk",
}

// library are the packages a user's program imports, and example programs
// that import only those: none of them may link the server.
var library = []string{
	"github.com/rdmacell/rdmacell/bootstrap",
	"github.com/rdmacell/rdmacell/comm",
	"github.com/rdmacell/rdmacell/collectives/...",
	"github.com/rdmacell/rdmacell/examples/...",
}

// TestLibraryDoesNotLinkTheServer lists what the library's packages
// depend on, with the go tool, and fails if any of them depends on the
// embedded etcd server: a program that only uses the library must not
// carry etcd's server, raft and OpenTelemetry (a few MB and some 170
// packages).
func TestLibraryDoesNotLinkTheServer(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go tool to list dependencies with: %v", err)
	}
	args := append([]string{"list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`}, library...)
	out, err := exec.Command(goTool, args...).Output()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, ee.Stderr)
	}
	require.NoError(t, err)

	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.GreaterOrEqual(t, len(lines), len(library), "go list listed too few packages:\n%s", out)
	for _, line := range lines {
		pkg, deps, _ := strings.Cut(line, " ")
		for _, bad := range serverOnly {
			for _, dep := range strings.Fields(deps) {
				if strings.HasPrefix(dep, bad) {
					t.Errorf("%s depends on %s, which only an etcd server needs", pkg, dep)
					break
				}
			}
		}
	}
}
