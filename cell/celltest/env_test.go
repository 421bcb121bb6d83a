package celltest

import (
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// The checks can fail: testdata/false_checks.txt claims what did not
// happen, and every one of its checks must report what is wrong (each
// report is in the golden output), where a script run by Handle would
// fail.
func TestChecksCanFail(t *testing.T) {
	env := NewEnv()
	datadriven.RunTest(t, "testdata/false_checks.txt", func(t *testing.T, d *datadriven.TestData) string {
		out, problems, err := env.Run(d)
		if err != nil {
			t.Fatalf("%s: %v", d.Pos, err)
		}
		if d.Cmd == "check" && len(problems) == 0 {
			t.Errorf("%s: %s passed, but the script says it is false", d.Pos, d.FullCmd())
		}
		if d.Cmd != "check" && len(problems) > 0 {
			t.Errorf("%s: %s: %s", d.Pos, d.FullCmd(), strings.Join(problems, "; "))
		}
		return out
	})
}
