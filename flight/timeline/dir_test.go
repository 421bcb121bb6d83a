package timeline

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rdmacell/rdmacell/flight"
	"github.com/stretchr/testify/require"
)

func writeDumps(t *testing.T, dir string, dumps []*flight.Dump) {
	for _, d := range dumps {
		require.NoError(t, d.WriteFile(dir))
	}
}

func TestMergeDirWritesTheTraceAndThePicture(t *testing.T) {
	dir := t.TempDir()
	dumps := threeRanks(t)
	writeDumps(t, dir, dumps)
	// Other files are not trace files.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rank-x.json"), []byte("{"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rank-01.json"), []byte("{"), 0o644))

	require.NoError(t, MergeDir(dir))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.Equal(t, []string{"notes.txt", "rank-0.json", "rank-01.json", "rank-1.json", "rank-2.json", "rank-x.json",
		TraceFile, PictureFile}, names, "no temporary file is left")

	// What MergeDir wrote is what Merge and RenderSVG make of the dumps
	// as the files hold them.
	b, err := os.ReadFile(filepath.Join(dir, TraceFile))
	require.NoError(t, err)
	var tf traceFile
	require.NoError(t, json.Unmarshal(b, &tf))
	back, err := ReadDir(dir)
	require.NoError(t, err)
	_, want := merge(t, back)
	require.Equal(t, string(want), string(b))
	_, fromMemory := merge(t, dumps)
	require.Equal(t, string(fromMemory), string(b), "the file form keeps all the trace shows")

	svg, err := os.ReadFile(filepath.Join(dir, PictureFile))
	require.NoError(t, err)
	require.Len(t, withClass(parseSVG(t, svg), "op"), 11)

	// Run again, after another dump: the files are replaced.
	d := dumps[0]
	d.Ops = slices.Delete(d.Ops, 3, 4)
	require.NoError(t, d.WriteFile(dir))
	require.NoError(t, MergeDir(dir))
	svg, err = os.ReadFile(filepath.Join(dir, PictureFile))
	require.NoError(t, err)
	require.Len(t, withClass(parseSVG(t, svg), "op"), 10)
}

func TestMergeDirNamesAMalformedFile(t *testing.T) {
	dir := t.TempDir()
	writeDumps(t, dir, threeRanks(t))
	bad := filepath.Join(dir, flight.FileName(1))
	require.NoError(t, os.WriteFile(bad, []byte(`{"job":"job-7","rank":1,"ops":[{"id":1,"state":"sleeping"}]}`), 0o644))
	err := MergeDir(dir)
	require.ErrorContains(t, err, bad)
	require.ErrorContains(t, err, `unknown state "sleeping"`)
	require.NoFileExists(t, filepath.Join(dir, TraceFile))

	require.NoError(t, os.WriteFile(bad, []byte(`{"job":"job-7","rank":1,`), 0o644))
	require.ErrorContains(t, MergeDir(dir), bad)

	// A trace file of another rank than its name says.
	writeDumps(t, dir, threeRanks(t))
	require.NoError(t, os.Rename(filepath.Join(dir, flight.FileName(2)), filepath.Join(dir, flight.FileName(5))))
	require.ErrorContains(t, MergeDir(dir), filepath.Join(dir, "rank-5.json")+" holds the trace of rank 2")

	empty := t.TempDir()
	require.ErrorContains(t, MergeDir(empty), "no trace files in "+empty)
}

// MergeDir turns the trace files the ranks of a job wrote into one trace
// for Perfetto and a picture.
func ExampleMergeDir() {
	dir, err := os.MkdirTemp("", "trace")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	r := flight.New(8, nil)
	h := r.Begin(&flight.Op{Comm: 1, Seq: 1, Name: "AllReduce", Algorithm: "ring", DType: "float32", Count: 2, Bytes: 8})
	r.Wait(h, 0, 1, flight.Recv)
	r.End(h, nil)
	for rank := range 2 {
		d := &flight.Dump{Job: "example", Rank: rank, Host: "localhost", PID: 100 + rank, Reason: "close", Time: r.Ops()[0].End, Ops: r.Ops()}
		if err := d.WriteFile(dir); err != nil {
			panic(err)
		}
	}
	if err := MergeDir(dir); err != nil {
		panic(err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		fmt.Println(e.Name())
	}
	// Output:
	// rank-0.json
	// rank-1.json
	// timeline.json
	// timeline.svg
}
