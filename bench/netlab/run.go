package netlab

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"time"
)

// commandTimeout bounds each iproute2 command, so that a wedged one cannot
// hang building or removing a lab.
const commandTimeout = 20 * time.Second

// run runs a command and returns its standard output; a failure is a
// *CommandError with what the command printed.
func run(ctx context.Context, name string, args ...string) (string, error) {
	return runInput(ctx, "", name, args...)
}

// runInput is run with input on the command's standard input (for the
// -batch mode of ip and tc).
func runInput(ctx context.Context, input, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	if input != "" {
		cmd.Stdin = strings.NewReader(input)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		out := stderr.String()
		if input != "" {
			out += "\ninput:\n" + input
		}
		return stdout.String(), &CommandError{Args: append([]string{name}, args...), Output: out, Err: err}
	}
	return stdout.String(), nil
}

// batch collects the commands of one namespace for one `ip -batch` or
// `tc -batch` run: one process instead of one per command.
type batch struct {
	lines []string
}

func (b *batch) add(words ...string) { b.lines = append(b.lines, strings.Join(words, " ")) }

func (b *batch) String() string { return strings.Join(b.lines, "\n") + "\n" }

// ipBatch runs b with ip inside namespace ns.
func ipBatch(ctx context.Context, ns string, b *batch) error {
	if len(b.lines) == 0 {
		return nil
	}
	_, err := runInput(ctx, b.String(), "ip", "-n", ns, "-batch", "-")
	return err
}

// tcBatch runs b with tc inside namespace ns.
func tcBatch(ctx context.Context, ns string, b *batch) error {
	if len(b.lines) == 0 {
		return nil
	}
	_, err := runInput(ctx, b.String(), "tc", "-n", ns, "-batch", "-")
	return err
}
