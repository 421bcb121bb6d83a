package launcher

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recorder keeps every Write as one piece, to check that lines stay whole.
type recorder struct {
	mu     sync.Mutex
	writes []string
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, string(p))
	return len(p), nil
}

func TestPump(t *testing.T) {
	long := strings.Repeat("x", maxLine+10)
	tests := []struct {
		name  string
		input string
		want  []string
	}{
		{"lines", "a\nbb\n", []string{"[7] a\n", "[7] bb\n"}},
		{"last line without newline", "a\nb", []string{"[7] a\n", "[7] b\n"}},
		{"empty lines", "\n\n", []string{"[7] \n", "[7] \n"}},
		{"nothing", "", nil},
		{"line longer than the buffer", long + "\n", []string{"[7] " + long[:maxLine] + "\n", "[7] " + long[maxLine:] + "\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := &recorder{}
			c := &console{stdout: out, stderr: io.Discard}
			logFile, err := openRankLog(t.TempDir(), 7, 0)
			require.NoError(t, err)
			pump(strings.NewReader(tt.input), c, out, []byte("[7] "), logFile, nil)
			require.NoError(t, logFile.close())
			assert.Equal(t, tt.want, out.writes, "one write per line")
			raw, err := os.ReadFile(logFile.path)
			require.NoError(t, err)
			assert.Equal(t, tt.input, string(raw), "the log keeps the output as written")
		})
	}
}

// TestPumpsDoNotInterleave runs many pumps onto one console: every line
// arrives whole.
func TestPumpsDoNotInterleave(t *testing.T) {
	var out bytes.Buffer
	c := &console{stdout: &out, stderr: &out}
	line := strings.Repeat("abcdefgh", 512)
	var wg sync.WaitGroup
	for r := range 8 {
		input := strings.Repeat(line+"\n", 50)
		wg.Go(func() { pump(strings.NewReader(input), c, &out, []byte{'[', byte('0' + r), ']', ' '}, nil, nil) })
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	assert.Len(t, lines, 8*50)
	for _, l := range lines {
		assert.Regexp(t, `^\[[0-7]\] (abcdefgh){512}$`, l)
	}
}

func TestOpenRankLogFails(t *testing.T) {
	_, err := openRankLog(filepath.Join(t.TempDir(), "missing"), 3, 0)
	assert.ErrorContains(t, err, "--log-dir: log of rank 3")
}
