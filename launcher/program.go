package launcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// program is the executable the ranks run, with the clean-up of whatever
// it took to make it.
type program struct {
	path    string
	cleanup func() error
}

// prepareProgram resolves cfg.Program. A directory is built, once, with
// "go build" into a temporary directory that cleanup removes; anything else
// is used as the ranks' executable (looked up in PATH when it has no slash).
func prepareProgram(ctx context.Context, name string, stderr io.Writer) (*program, error) {
	info, err := os.Stat(name)
	if err != nil || !info.IsDir() {
		path, err := exec.LookPath(name)
		if err != nil {
			return nil, fmt.Errorf("PROGRAM %q: %w", name, err)
		}
		return &program{path: path, cleanup: func() error { return nil }}, nil
	}
	return buildProgram(ctx, name, stderr)
}

// buildProgram builds the Go main package in dir. The compiler's messages
// go to stderr, where the user expects them.
func buildProgram(ctx context.Context, dir string, stderr io.Writer) (*program, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("PROGRAM %q is a directory, and building it needs the go command: %w", dir, err)
	}
	tmp, err := os.MkdirTemp("", "cellrun-build-"+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, fmt.Errorf("PROGRAM %q: build directory: %w", dir, err)
	}
	p := &program{
		path: filepath.Join(tmp, filepath.Base(filepath.Clean(absOr(dir)))),
		cleanup: func() error {
			if err := os.RemoveAll(tmp); err != nil {
				return fmt.Errorf("remove build directory: %w", err)
			}
			return nil
		},
	}
	// "go build -o" of a package that is not main writes its archive
	// rather than failing, so ask first.
	name, err := runGo(ctx, goTool, dir, io.Discard, "list", "-f", "{{.Name}}", ".")
	if err != nil {
		return nil, errors.Join(fmt.Errorf("PROGRAM directory %q: %w", dir, err), p.cleanup())
	}
	if name != "main" {
		return nil, errors.Join(fmt.Errorf("PROGRAM directory %q holds package %s, want a main package", dir, name), p.cleanup())
	}
	if _, err := runGo(ctx, goTool, dir, stderr, "build", "-o", p.path, "."); err != nil {
		return nil, errors.Join(fmt.Errorf("build PROGRAM directory %q: %w", dir, err), p.cleanup())
	}
	return p, nil
}

// absOr gives the absolute form of a path, so that "." names its directory.
func absOr(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}

// runGo runs the go command in dir and returns its trimmed standard output.
// Its messages go to stderr, where the user expects compiler errors; a
// failing "go list" says what is wrong in its error instead.
func runGo(ctx context.Context, goTool, dir string, stderr io.Writer, args ...string) (string, error) {
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, goTool, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &out, io.MultiWriter(stderr, &errOut)
	// The go command runs compilers of its own; an interrupted build must
	// take them along.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Run(); err != nil {
		if msg := strings.TrimSpace(errOut.String()); msg != "" && stderr == io.Discard {
			return "", fmt.Errorf("go %s: %w: %s", args[0], err, msg)
		}
		return "", fmt.Errorf("go %s: %w", args[0], err)
	}
	return strings.TrimSpace(out.String()), nil
}
