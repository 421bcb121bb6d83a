package timeline

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rdmacell/rdmacell/flight"
)

// The files MergeDir writes beside the ranks' trace files.
const (
	TraceFile   = "timeline.json"
	PictureFile = "timeline.svg"
)

// ReadDir reads the trace file of every rank in dir (the files named
// flight.FileName(rank)), ignoring other files. A file that does not
// parse, or holds the dump of another rank than its name says, is an error
// naming it.
func ReadDir(dir string) ([]*flight.Dump, error) {
	names, err := filepath.Glob(filepath.Join(dir, "rank-*.json"))
	if err != nil {
		return nil, err
	}
	var dumps []*flight.Dump
	for _, name := range names {
		rank, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(name), "rank-"), ".json"))
		if err != nil || flight.FileName(rank) != filepath.Base(name) {
			continue // rank-x.json: not a trace file
		}
		d, err := flight.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("timeline: %w", err)
		}
		if d.Rank != rank {
			return nil, fmt.Errorf("timeline: %s holds the trace of rank %d", name, d.Rank)
		}
		dumps = append(dumps, d)
	}
	if len(dumps) == 0 {
		return nil, fmt.Errorf("timeline: no trace files in %s", dir)
	}
	return dumps, nil
}

// MergeDir reads the ranks' trace files in dir and writes the merged
// trace (Merge) to dir/TraceFile and its picture (RenderSVG) to
// dir/PictureFile, each replaced at once through a temporary file and a
// rename, so that a reader never sees half of one.
func MergeDir(dir string) error {
	dumps, err := ReadDir(dir)
	if err != nil {
		return err
	}
	if err := writeFile(dir, TraceFile, func(w io.Writer) error { return Merge(w, dumps) }); err != nil {
		return err
	}
	return writeFile(dir, PictureFile, func(w io.Writer) error { return RenderSVG(w, dumps) })
}

// writeFile writes what write writes to dir/name, through a temporary file
// and a rename.
func writeFile(dir, name string, write func(io.Writer) error) error {
	f, err := os.CreateTemp(dir, "."+name+".*")
	if err != nil {
		return fmt.Errorf("timeline: %w", err)
	}
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("timeline: write %s: %w", filepath.Join(dir, name), err)
	}
	return nil
}
