package netlab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// killWait bounds how long removing a namespace waits for the processes
// it killed to leave it.
const killWait = 5 * time.Second

// Cleanup removes the labs that query names (a lab's name or its ID; ""
// names every lab) and that no running process owns: detached labs
// (UpDetached, `netlab up`) and the leftovers of processes that ended
// without taking theirs down. The processes still running in their
// namespaces are killed. A lab whose owner still runs is never touched;
// if query names one, the error, wrapping ErrInUse, says which process
// owns it. Cleanup returns the IDs of the labs it removed.
func Cleanup(ctx context.Context, query string) ([]string, error) {
	if query != "" {
		if err := checkQuery(query); err != nil {
			return nil, err
		}
	}
	labs, err := labsUp(ctx)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, id := range sortedIDs(labs) {
		switch {
		case !id.matches(query):
		case id.owner != 0 && processAlive(id.owner):
			if query != "" {
				errs = append(errs, fmt.Errorf("%w: lab %s belongs to process %d, which still runs: end it, and it takes its lab down", ErrInUse, id, id.owner))
			}
		default:
			if err := removeNamespaces(ctx, labs[id]); err != nil {
				errs = append(errs, fmt.Errorf("netlab: remove lab %s: %w", id, err))
				continue
			}
			removed = append(removed, id.String())
		}
	}
	return removed, errors.Join(errs...)
}

// reapLeftovers removes the labs of processes that no longer run, as they
// would have on their way out had they not crashed or been killed. The
// labs of running processes and detached labs stay.
func reapLeftovers(ctx context.Context) error {
	labs, err := labsUp(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range sortedIDs(labs) {
		if id.owner != 0 && !processAlive(id.owner) {
			if err := removeNamespaces(ctx, labs[id]); err != nil {
				errs = append(errs, fmt.Errorf("netlab: remove leftover lab %s of process %d: %w", id, id.owner, err))
			}
		}
	}
	return errors.Join(errs...)
}

// processAlive says whether process pid still runs. A zombie counts as
// running until its parent reaps it: its lab is then removed a little
// later, never too early.
func processAlive(pid int) bool {
	if pid == os.Getpid() {
		return true
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// labsUp finds the labs on the machine, each with the namespaces it has.
func labsUp(ctx context.Context) (map[labID][]string, error) {
	all, err := listNamespaces(ctx)
	if err != nil {
		return nil, err
	}
	labs := map[labID][]string{}
	for _, ns := range all {
		if id, _, ok := parseNamespace(ns); ok {
			labs[id] = append(labs[id], ns)
		}
	}
	return labs, nil
}

// sortedIDs lists the labs in a stable order.
func sortedIDs(labs map[labID][]string) []labID {
	ids := make([]labID, 0, len(labs))
	for id := range labs {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b labID) int { return strings.Compare(a.prefix(), b.prefix()) })
	return ids
}

// namespacesOf lists the namespaces of the lab id that exist, whether the
// lab was built completely or not.
func namespacesOf(ctx context.Context, id labID) ([]string, error) {
	labs, err := labsUp(ctx)
	return labs[id], err
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

// removeNamespaces kills the processes in each namespace and deletes it.
// A namespace that is gone already is no error: another process may be
// removing the same leftovers.
func removeNamespaces(ctx context.Context, namespaces []string) error {
	var errs []error
	for _, ns := range namespaces {
		err := killAll(ctx, ns)
		if err == nil {
			_, err = run(ctx, "ip", "netns", "delete", ns)
		}
		if err != nil && namespaceExists(ns) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// namespaceExists says whether the named namespace ns is still there.
func namespaceExists(ns string) bool {
	_, err := os.Stat("/run/netns/" + ns)
	return err == nil
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
