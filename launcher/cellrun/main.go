// Command cellrun starts the ranks of an RDMACell job on this node and
// supervises them. See package launcher, or run cellrun --help.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/rdmacell/rdmacell/launcher"
)

func main() {
	// Buffered, so that a second signal is not lost while the first one is
	// being forwarded.
	signals := make(chan os.Signal, 4)
	// SIGUSR1 asks the ranks for their traces (--trace-dir).
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGUSR1)
	os.Exit(launcher.Main(context.Background(), os.Args[1:], signals, os.Stdout, os.Stderr))
}
