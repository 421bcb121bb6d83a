package experiment

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rdmacell/rdmacell/bench/netlab"
	"github.com/rdmacell/rdmacell/launcher"
)

// EtcdPort is where cellrun on host 0 serves the job's etcd to the other
// hosts, over the fabric.
const EtcdPort = 2379

// Job is one RDMACell job on a lab: cellrun on each of the first Hosts
// hosts, one node per host, with host 0 serving etcd.
type Job struct {
	Lab *netlab.Lab
	// Cellrun is the cellrun executable.
	Cellrun string
	// Program and Args are what every rank runs.
	Program string
	Args    []string
	// Hosts is the number of hosts (nodes) taking part, the lab's first
	// ones (default every host); RanksPerHost the ranks on each (default 1).
	Hosts, RanksPerHost int
	// Policy, Paths, CellSize and Transport are cellrun's --policy,
	// --paths, --cell-size and --transport; empty and zero leave
	// cellrun's defaults.
	Policy    string
	Paths     int
	CellSize  int
	Transport string
	// Env is added to the environment of cellrun and its ranks.
	Env []string
	// Timeout bounds the job (default 5 minutes). Past it the job has
	// hung: every rank gets SIGQUIT (labprog then prints its goroutines
	// and carries on), QuitGrace later every node gets SIGTERM, and
	// SIGKILL netlab.StopGrace after that. Run's error then wraps
	// ErrTimeout.
	Timeout time.Duration
	// Line, if set, sees every line a node prints, stdout and stderr, with
	// the host that printed it. It must not block.
	Line func(host int, line string)
}

// DefaultJobTimeout bounds a job whose Timeout is zero.
const DefaultJobTimeout = 5 * time.Minute

// QuitGrace is how long the ranks of a job past its timeout get, after
// SIGQUIT, to print their goroutines before the nodes are stopped.
const QuitGrace = 5 * time.Second

// ErrTimeout says that a job ran past its timeout: it hung.
var ErrTimeout = errors.New("experiment: job timed out")

// NodeError is a node of a job whose cellrun failed.
type NodeError struct {
	Host int
	Err  error
	// Tail is the last lines the node printed.
	Tail []string
}

func (e *NodeError) Error() string {
	return fmt.Sprintf("experiment: node on host %d: %v; last output:\n  %s", e.Host, e.Err, strings.Join(e.Tail, "\n  "))
}

func (e *NodeError) Unwrap() error { return e.Err }

// tailLines is how much of a failed node's output its error keeps.
const tailLines = 12

// Run runs the job and waits for every node. The error joins a *NodeError
// for each node that failed.
func (j *Job) Run(ctx context.Context) error {
	hosts := j.Hosts
	if hosts == 0 {
		hosts = j.Lab.Hosts()
	}
	if hosts < 1 || hosts > j.Lab.Hosts() {
		return fmt.Errorf("experiment: %d hosts: the lab has %d", hosts, j.Lab.Hosts())
	}
	timeout := j.Timeout
	if timeout == 0 {
		timeout = DefaultJobTimeout
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	id, err := jobID()
	if err != nil {
		return err
	}
	etcd := net.JoinHostPort(j.Lab.HostAddr(0).String(), strconv.Itoa(EtcdPort))
	// Every node joins node 0's etcd, over TLS, with the job's token.
	token := launcher.NewToken()

	errs := make([]error, hosts)
	cmds := make([]*exec.Cmd, hosts)
	for h := range hosts {
		args := []string{"--nnodes", strconv.Itoa(hosts), "--node-rank", strconv.Itoa(h), "--job", id, "--join", token}
		if h == 0 {
			args = append(args, "--etcd-serve", etcd)
		} else {
			args = append(args, "--etcd", etcd)
		}
		args = append(args, j.knobs()...)
		args = append(args, j.Program)
		args = append(args, j.Args...)
		cmd := j.Lab.Command(ctx, h, j.Cellrun, args...)
		// The ranks listen for their peers on the host's own address.
		cmd.Env = append(append(os.Environ(), j.Env...), "RDMACELL_TCP_ADDR="+j.Lab.HostAddr(h).String())
		cmds[h] = cmd
	}
	var timedOut atomic.Bool
	var wg sync.WaitGroup
	started := make(chan struct{}, hosts)
	for h, cmd := range cmds {
		wg.Go(func() { errs[h] = j.runNode(cmd, h, started) })
	}
	for range hosts {
		<-started
	}
	// Past the timeout: goroutine dumps from every rank, then stop.
	timer := time.AfterFunc(timeout, func() {
		timedOut.Store(true)
		for _, cmd := range cmds {
			if cmd.Process != nil {
				quitChildren(cmd.Process.Pid)
			}
		}
		time.AfterFunc(QuitGrace, cancel)
	})
	wg.Wait()
	timer.Stop()
	if timedOut.Load() {
		errs = append([]error{fmt.Errorf("%w after %v: ranks sent SIGQUIT, then stopped", ErrTimeout, timeout)}, errs...)
	}
	return errors.Join(errs...)
}

// quitChildren sends SIGQUIT to the children of process pid (a node's
// cellrun: its ranks). Each thread of pid lists the children it forked.
func quitChildren(pid int) {
	lists, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, list := range lists {
		b, err := os.ReadFile(list)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if child, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(child, syscall.SIGQUIT)
			}
		}
	}
}

// knobs are cellrun's flags for the ranks.
func (j *Job) knobs() []string {
	ranks := max(j.RanksPerHost, 1)
	args := []string{"-n", strconv.Itoa(ranks)}
	if j.Policy != "" {
		args = append(args, "--policy", j.Policy)
	}
	if j.Paths != 0 {
		args = append(args, "--paths", strconv.Itoa(j.Paths))
	}
	if j.CellSize != 0 {
		args = append(args, "--cell-size", strconv.Itoa(j.CellSize))
	}
	if j.Transport != "" {
		args = append(args, "--transport", j.Transport)
	}
	return args
}

// runNode runs one node's cellrun, passing its lines on; started
// receives once cmd has started, or failed to.
func (j *Job) runNode(cmd *exec.Cmd, host int, started chan<- struct{}) error {
	line := func(line string) {
		if j.Line != nil {
			j.Line(host, line)
		}
	}
	// Not pipes read here: exec copies into writers itself, and Wait,
	// bounded by the command's WaitDelay, stops copying even when a
	// process left behind still holds the other end.
	stdout, stderr := &lineWriter{line: line}, &lineWriter{line: line}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err := cmd.Start()
	started <- struct{}{}
	if err == nil {
		err = cmd.Wait()
	}
	if err != nil {
		return &NodeError{Host: host, Err: err, Tail: append(stdout.tail(), stderr.tail()...)}
	}
	return nil
}

// lineWriter cuts what is written into lines, hands each to line and
// keeps the last few.
type lineWriter struct {
	line func(string)

	mu      sync.Mutex
	partial []byte
	last    []string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		line := string(w.partial[:i])
		w.partial = w.partial[i+1:]
		w.last = append(w.last, line)
		if len(w.last) > tailLines {
			w.last = w.last[1:]
		}
		w.line(line)
	}
	return len(p), nil
}

func (w *lineWriter) tail() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.last...)
}

// jobID is a fresh job id.
func jobID() (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("experiment: job id: %w", err)
	}
	return "lab-" + hex.EncodeToString(b[:]), nil
}
