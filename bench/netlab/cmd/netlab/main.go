// Command netlab builds a leaf-spine fabric in network namespaces, injects
// faults into it and runs RDMACell's multipath experiments on it. Run
// `netlab help` (as root) for its commands; see package cli.
package main

import (
	"context"
	"os"

	"github.com/rdmacell/rdmacell/bench/netlab/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
