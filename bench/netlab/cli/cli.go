// Package cli is the netlab command: it brings a lab up and down by hand,
// injects faults into it, runs programs on its hosts, and runs the
// experiments (see package experiment).
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"github.com/rdmacell/rdmacell/bench/netlab"
)

// command is one subcommand.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{
	"up":      {"build a lab and leave it up", cmdUp},
	"down":    {"take a lab (--all: every lab no running process owns) down", cmdDown},
	"status":  {"describe a lab and the bytes on its spine links", cmdStatus},
	"exec":    {"run a program on a lab host: netlab exec --host H -- PROGRAM [ARGS]", cmdExec},
	"degrade": {"shape a spine link to a fraction of its rate", cmdDegrade},
	"restore": {"give a spine link its rate back", cmdRestore},
	"link":    {"take a spine link down (on its leaf's side) or up: netlab link --spine S --leaf L down|up", cmdLink},
	"flap":    {"make a spine link flap for a while", cmdFlap},
	"run":     {"run the experiments on a lab of their own", cmdRun},
}

// errUsage marks a bad command line.
var errUsage = errors.New("usage")

// Main runs the netlab command with args (without the program name) and
// returns its exit status.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "netlab: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	err := cmd.run(ctx, args[1:], stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, pflag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "netlab %s: %v\n", args[0], err)
		return 2
	}
	fmt.Fprintf(stderr, "netlab %s: %v\n", args[0], err)
	return 1
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: netlab COMMAND [flags]   (as root)")
	fmt.Fprintln(w, "\nA leaf-spine fabric in network namespaces, for RDMACell's multipath experiments.")
	fmt.Fprintln(w, "\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nnetlab COMMAND --help lists a command's flags.")
}

// flagSet is a command's flag set; errors come back to Main.
func flagSet(name string, stderr io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet("netlab "+name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	return fs
}

// parse parses args and wraps a bad command line in errUsage.
func parse(fs *pflag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	return nil
}

// labFlags are the flags that describe a lab to build.
func labFlags(fs *pflag.FlagSet, cfg *netlab.Config, name string) {
	cfg.SpineRate, cfg.HostRate = netlab.DefaultSpineRate, netlab.Unlimited
	fs.StringVar(&cfg.Name, "name", name, "lab `NAME`: lower-case letters and digits")
	fs.IntVar(&cfg.Hosts, "hosts", netlab.DefaultHosts, "`N` hosts, alternately on leaf 0 and leaf 1")
	fs.IntVar(&cfg.Spines, "spines", netlab.DefaultSpines, "`N` spines")
	fs.Var(&cfg.SpineRate, "spine-rate", "rate of each spine link each way, e.g. 100mbit, or unlimited")
	fs.Var(&cfg.HostRate, "host-rate", "rate of each host link each way, or unlimited")
	fs.DurationVar(&cfg.QueueDelay, "queue", netlab.DefaultQueueDelay, "queue of a shaped link, as the time its rate takes to send it")
	fs.DurationVar(&cfg.RTOMin, "rto-min", 0, "hosts' minimum TCP retransmission timeout (0: the kernel's)")
	fs.StringVar(&cfg.Congestion, "congestion", "", "hosts' TCP congestion control (empty: the kernel's)")
}

// nameFlag is the flag that names a lab that is up.
func nameFlag(fs *pflag.FlagSet) *string {
	return fs.String("name", netlab.DefaultName, "the lab's `NAME`, or its ID if several of that name are up")
}

// linkFlags are the flags that name a spine link.
func linkFlags(fs *pflag.FlagSet, link *netlab.SpineLink) {
	fs.IntVar(&link.Spine, "spine", 0, "spine `S` of the link")
	fs.IntVar(&link.Leaf, "leaf", 1, "leaf `L` (0 or 1) of the link")
}

// parseNoArgs is parse for a command that takes flags only.
func parseNoArgs(fs *pflag.FlagSet, args []string) error {
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %s", errUsage, strings.Join(fs.Args(), " "))
	}
	return nil
}
