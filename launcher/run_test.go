package launcher

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// inProcess runs Run in this process; its output arrives on line logs.
type inProcess struct {
	stdout, stderr *lineLog
	done           chan struct{}
	code           int
	err            error
}

func startRun(ctx context.Context, cfg Config) *inProcess {
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	p := &inProcess{stdout: newLineLog(outR), stderr: newLineLog(errR), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.code, p.err = Run(ctx, cfg, outW, errW)
		_ = outW.Close()
		_ = errW.Close()
	}()
	return p
}

func (p *inProcess) wait(ctx context.Context, t *testing.T) {
	t.Helper()
	select {
	case <-p.done:
	case <-ctx.Done():
		require.FailNow(t, "Run did not return")
	}
	<-p.stdout.done
	<-p.stderr.done
}

// TestRunInProcess drives the library API: a job, a forwarded signal, the
// end of the caller's context, and a bad Config.
func TestRunInProcess(t *testing.T) {
	// Run's temporary files go to $TMPDIR, hence no t.Parallel.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	base := Config{Program: bin.rankprog, ProcsPerNode: 2, Nodes: 1, Env: cleanEnv(tmp)}

	t.Run("success", func(t *testing.T) {
		ctx := testContext(t)
		p := startRun(ctx, base)
		p.wait(ctx, t)
		require.NoError(t, p.err)
		assert.Equal(t, 0, p.code)
		assert.Contains(t, p.stdout.all(), "[1] passed barrier")
		assert.Empty(t, ownLines(p.stderr.all()))
	})

	t.Run("signal", func(t *testing.T) {
		ctx := testContext(t)
		signals := make(chan os.Signal, 1)
		cfg := base
		cfg.Args, cfg.Signals = []string{"-block"}, signals
		p := startRun(ctx, cfg)
		p.stdout.waitCount(ctx, t, "blocked", 2)
		signals <- syscall.SIGTERM
		p.wait(ctx, t)
		require.NoError(t, p.err)
		assert.Equal(t, 143, p.code)
		assert.Equal(t, []string{"cellrun: stopped by signal 15 (terminated)"}, ownLines(p.stderr.all()))
		assert.Contains(t, p.stdout.all(), "[0] got signal terminated")
	})

	t.Run("context", func(t *testing.T) {
		ctx := testContext(t)
		runCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		cfg := base
		cfg.Args = []string{"-block"}
		p := startRun(runCtx, cfg)
		p.stdout.waitCount(ctx, t, "blocked", 2)
		cancel()
		p.wait(ctx, t)
		assert.ErrorIs(t, p.err, context.Canceled)
		assert.Equal(t, ExitFailure, p.code)
		assert.Empty(t, ownLines(p.stderr.all()), "the error is the caller's to report")
		assert.Contains(t, p.stdout.all(), "[1] got signal terminated")
	})

	t.Run("bad config", func(t *testing.T) {
		code, err := Run(testContext(t), Config{Program: "x", ProcsPerNode: 1, Nodes: 1, Transport: "rdma"}, io.Discard, io.Discard)
		assert.Equal(t, ExitUsage, code)
		assert.ErrorIs(t, err, ErrUsage)
		var fe *FlagError
		require.True(t, errors.As(err, &fe))
		assert.Equal(t, FlagError{Flag: "--transport", Value: "rdma", Want: "want auto, shm, tcp or ibv"}, *fe)
	})

	entries, err := os.ReadDir(tmp)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "Test") { // t.TempDir of the subtests
			names = append(names, e.Name())
		}
	}
	assert.Empty(t, names, "Run left temporary files")
}
