package netlab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// killWait bounds how long Cleanup waits for the processes it killed to
// leave a namespace.
const killWait = 5 * time.Second

// Cleanup removes every namespace of the lab called name, and the
// processes in them; with name "" it removes those of every lab. It is
// how leftovers of a run that crashed are removed.
func Cleanup(ctx context.Context, name string) error {
	prefix := NamePrefix
	if name != "" {
		if !namePattern.MatchString(name) {
			return fmt.Errorf("%w: name %q: want 1 to 12 lower-case letters and digits", ErrConfig, name)
		}
		prefix = labPrefix(name)
	}
	all, err := listNamespaces(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, ns := range all {
		if !strings.HasPrefix(ns, prefix) {
			continue
		}
		if err := killAll(ctx, ns); err != nil {
			errs = append(errs, err)
		}
		if _, err := run(ctx, "ip", "netns", "delete", ns); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// listNamespaces returns the names of the machine's named network
// namespaces.
func listNamespaces(ctx context.Context) ([]string, error) {
	out, err := run(ctx, "ip", "netns", "list")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, line := range strings.Split(out, "\n") {
		// Lines read "name" or "name (id: 3)".
		if f := strings.Fields(line); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names, nil
}

// killAll kills the processes whose network namespace is ns, which only a
// lab's own runs put there, and waits until they are gone: a namespace
// deleted under a running process would live on, unnamed, with it.
func killAll(ctx context.Context, ns string) error {
	deadline := time.Now().Add(killWait)
	for {
		pids, err := namespacePids(ctx, ns)
		if err != nil || len(pids) == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("netlab: processes %v still in namespace %s after SIGKILL", pids, ns)
		}
		for _, pid := range pids {
			// Gone meanwhile is fine.
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("netlab: wait for processes of namespace %s: %w", ns, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// namespacePids lists the processes running in namespace ns.
func namespacePids(ctx context.Context, ns string) ([]int, error) {
	out, err := run(ctx, "ip", "netns", "pids", ns)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(out) {
		// Never this process: it only visits namespaces on threads of its
		// own (InHost), and ip lists a process by its main thread.
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 && pid != os.Getpid() {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}
