package netlab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// StopGrace is how long a command started by Command gets to exit after
// SIGTERM, once its context ends, before it is killed.
const StopGrace = 15 * time.Second

// HostName is the hostname processes on host h see: the network
// namespaces share the machine's hostname, and the communicator would
// take ranks on different lab hosts for neighbours on one machine.
func (l *Lab) HostName(h int) string { return fmt.Sprintf("%s-h%d", l.cfg.Name, h) }

// Command returns a command that runs name with args on host h: in the
// host's network namespace, under the hostname HostName(h) (in a UTS
// namespace of its own), in a process group of its own. When ctx ends
// the command gets SIGTERM, and SIGKILL StopGrace later.
func (l *Lab) Command(ctx context.Context, h int, name string, args ...string) *exec.Cmd {
	// sh sets the hostname inside the new UTS namespace, then becomes the
	// program: the process ip starts is the program itself.
	full := append([]string{"netns", "exec", l.id.hostNS(h),
		"sh", "-c", `hostname "$0" && exec "$@"`, l.HostName(h), name}, args...)
	cmd := exec.CommandContext(ctx, "ip", full...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUTS, Setpgid: true}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = StopGrace
	return cmd
}

// InHost runs f on a thread in host h's network namespace: sockets f
// opens (listeners, connections) belong to the host, and stay with it
// when used from other goroutines later.
func (l *Lab) InHost(h int, f func() error) error {
	if h < 0 || h >= l.cfg.Hosts {
		return fmt.Errorf("%w: host %d: the lab has hosts 0..%d", ErrConfig, h, l.cfg.Hosts-1)
	}
	return inNamespace(l.id.hostNS(h), f)
}

// inNamespace runs f on a locked thread moved into namespace ns. The
// thread is never unlocked: when the goroutine ends, the runtime ends the
// thread with it rather than let another goroutine run in the namespace.
func inNamespace(ns string, f func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			done <- fmt.Errorf("netlab: open namespace %s: %w", ns, err)
			return
		}
		err = unix.Setns(fd, unix.CLONE_NEWNET)
		_ = unix.Close(fd)
		if err != nil {
			done <- fmt.Errorf("netlab: enter namespace %s: %w", ns, os.NewSyscallError("setns", err))
			return
		}
		done <- f()
	}()
	return <-done
}
