package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"github.com/rdmacell/rdmacell/bench/netlab"
)

func cmdUp(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flagSet("up", stderr)
	var cfg netlab.Config
	labFlags(fs, &cfg, netlab.DefaultName)
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	// An interrupt while building takes the half-built lab down.
	stop := netlab.HandleSignals()
	defer stop()
	// Detached: the lab stays when this command ends.
	l, err := netlab.UpDetached(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, l.Describe())
	fmt.Fprintf(stdout, "take it down with: netlab down --name %s\n", cfg.Name)
	return nil
}

func cmdDown(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flagSet("down", stderr)
	name := nameFlag(fs)
	all := fs.Bool("all", false, "take every lab down that no running process owns")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	query := *name
	if *all {
		query = ""
	}
	removed, err := netlab.Cleanup(ctx, query)
	for _, id := range removed {
		fmt.Fprintf(stdout, "lab %s down\n", id)
	}
	if err == nil && len(removed) == 0 && query != "" {
		err = fmt.Errorf("no lab %q is up", query)
	}
	return err
}

func cmdStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flagSet("status", stderr)
	name := nameFlag(fs)
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	l, err := netlab.Discover(ctx, *name)
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, l.Describe())
	counts, err := l.SpineBytes(ctx)
	if err != nil {
		return err
	}
	for _, c := range counts {
		fmt.Fprintf(stdout, "  %v: %d bytes to the leaf, %d from it\n", c.Link, c.ToLeaf, c.FromLeaf)
	}
	return nil
}

func cmdExec(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flagSet("exec", stderr)
	name := nameFlag(fs)
	host := fs.Int("host", 0, "host `H` to run on")
	fs.SetInterspersed(false)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("%w: missing PROGRAM: netlab exec --host H -- PROGRAM [ARGS]", errUsage)
	}
	l, err := netlab.Discover(ctx, *name)
	if err != nil {
		return err
	}
	if *host < 0 || *host >= l.Hosts() {
		return fmt.Errorf("%w: --host %d: the lab has hosts 0..%d", errUsage, *host, l.Hosts()-1)
	}
	cmd := l.Command(ctx, *host, fs.Arg(0), fs.Args()[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return fmt.Errorf("%s on host %d: %w", fs.Arg(0), *host, err)
	}
	return err
}

func cmdDegrade(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flagSet("degrade", stderr)
	name := nameFlag(fs)
	var link netlab.SpineLink
	linkFlags(fs, &link)
	fraction := fs.Float64("fraction", 0.1, "`F` of the link's rate to leave it")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	l, err := netlab.Discover(ctx, *name)
	if err != nil {
		return err
	}
	return l.Degrade(ctx, link, *fraction)
}

func cmdRestore(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flagSet("restore", stderr)
	name := nameFlag(fs)
	var link netlab.SpineLink
	linkFlags(fs, &link)
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	l, err := netlab.Discover(ctx, *name)
	if err != nil {
		return err
	}
	return l.Restore(ctx, link)
}

func cmdLink(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flagSet("link", stderr)
	name := nameFlag(fs)
	var link netlab.SpineLink
	linkFlags(fs, &link)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 || fs.Arg(0) != "down" && fs.Arg(0) != "up" {
		return fmt.Errorf("%w: want down or up after the flags", errUsage)
	}
	l, err := netlab.Discover(ctx, *name)
	if err != nil {
		return err
	}
	if fs.Arg(0) == "down" {
		return l.LinkDown(ctx, link)
	}
	return l.LinkUp(ctx, link)
}

func cmdFlap(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flagSet("flap", stderr)
	name := nameFlag(fs)
	var link netlab.SpineLink
	linkFlags(fs, &link)
	var f netlab.Flap
	fs.DurationVar(&f.Down, "down", 300*time.Millisecond, "time down in each cycle")
	fs.DurationVar(&f.Up, "up", 700*time.Millisecond, "time up in each cycle")
	fs.DurationVar(&f.For, "for", 30*time.Second, "how long to flap")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	l, err := netlab.Discover(ctx, *name)
	if err != nil {
		return err
	}
	return l.Flap(ctx, link, f)
}
