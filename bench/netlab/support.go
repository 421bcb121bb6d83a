package netlab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
)

// Supported returns nil when this process can build labs: it runs as root
// and `ip netns` works. Otherwise the error, wrapping ErrNotSupported,
// says why; tests skip with it.
func Supported(ctx context.Context) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: needs root (euid %d)", ErrNotSupported, os.Geteuid())
	}
	for _, tool := range []string{"ip", "tc", "sysctl", "hostname"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%w: %s not found: %w", ErrNotSupported, tool, err)
		}
	}
	if _, err := run(ctx, "ip", "netns", "list"); err != nil {
		return fmt.Errorf("%w: %w", ErrNotSupported, err)
	}
	return nil
}
