package launcher

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// maxLine is the longest line passed on whole; a longer one is cut into
// pieces of this size, each ending its own output line, so that one rank
// cannot hold the console (or cellrun's memory) with an endless line.
const maxLine = 64 << 10

// console is cellrun's stdout and stderr, shared by every rank. One lock
// for both streams keeps lines whole even when both go to one terminal.
type console struct {
	mu     sync.Mutex
	stdout io.Writer
	stderr io.Writer
}

// write puts one whole line on w. A failing terminal or pipe must not stop
// the ranks, so errors are dropped: the pump keeps draining the rank.
func (c *console) write(w io.Writer, line []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _ = w.Write(line)
}

// rankLog is a rank's --log-dir file, shared by its stdout and stderr.
type rankLog struct {
	mu   sync.Mutex
	f    *os.File
	path string
	err  error // first write error, reported at close
}

// openRankLog creates (or truncates) dir/rank.N.log, or dir/rank.N.gG.log
// for generation G > 0, so that a restart keeps the log of the failure.
func openRankLog(dir string, rank, gen int) (*rankLog, error) {
	name := "rank." + strconv.Itoa(rank)
	if gen > 0 {
		name += ".g" + strconv.Itoa(gen)
	}
	path := filepath.Join(dir, name+".log")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("--log-dir: log of rank %d: %w", rank, err)
	}
	return &rankLog{f: f, path: path}, nil
}

// write appends raw output; a nil log takes nothing.
func (l *rankLog) write(b []byte) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return
	}
	if _, err := l.f.Write(b); err != nil {
		l.err = err
	}
}

// close closes the file and returns the first error met while writing it.
func (l *rankLog) close() error {
	if l == nil {
		return nil
	}
	err := errors.Join(l.err, l.f.Close())
	if err != nil {
		return fmt.Errorf("log file %s: %w", l.path, err)
	}
	return nil
}

// pump copies r, line by line, to w through the console, each line
// preceded by prefix, and raw to log; note, if set, sees every line. It
// returns at end of input or on a read error (such as the deadline set when
// a rank's output outlives it).
func pump(r io.Reader, c *console, w io.Writer, prefix []byte, log *rankLog, note func([]byte)) {
	br := bufio.NewReaderSize(r, maxLine)
	line := make([]byte, 0, len(prefix)+maxLine+1)
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			log.write(chunk)
			if note != nil {
				note(chunk)
			}
			line = append(append(line[:0], prefix...), chunk...)
			if line[len(line)-1] != '\n' {
				line = append(line, '\n')
			}
			c.write(w, line)
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}
