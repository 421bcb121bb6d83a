package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
)

// Main is the cellrun command: it parses args (the command line without
// the program name) and, under srun, the Slurm task's environment, runs the job with the signals to forward, and returns
// the exit code. Bad flags are reported on stderr with ExitUsage, --help on
// stdout with 0.
func Main(ctx context.Context, args []string, signals <-chan os.Signal, stdout, stderr io.Writer) int {
	cfg, err := ParseArgsEnv(args, os.LookupEnv)
	if errors.Is(err, ErrHelp) {
		_, _ = io.WriteString(stdout, Usage())
		return 0
	}
	if errors.Is(err, ErrNewToken) {
		_, _ = io.WriteString(stdout, NewToken()+"\n")
		return 0
	}
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "cellrun: %v\nRun 'cellrun --help' for the flags.\n", err)
		return ExitUsage
	}
	cfg.Signals = signals
	code, err := Run(ctx, cfg, stdout, stderr)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "cellrun: %v\n", err)
		if errors.Is(err, ErrUsage) {
			_, _ = io.WriteString(stderr, "Run 'cellrun --help' for the flags.\n")
		}
	}
	return code
}
