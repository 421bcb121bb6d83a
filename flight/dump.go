package flight

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Dump is what a rank writes out: its recorder's operations with who
// wrote them, when and why. Its JSON form is the trace file of one rank.
type Dump struct {
	Job  string `json:"job"`
	Rank int    `json:"rank"`
	Host string `json:"host"`
	PID  int    `json:"pid"`
	// Reason says why the dump was written: "failure: ...", "watchdog:
	// ...", "requested", "close".
	Reason string    `json:"reason"`
	Time   time.Time `json:"time"`
	Ops    []Op      `json:"ops"`
}

// FileName is the name of rank's trace file in a trace directory.
func FileName(rank int) string { return fmt.Sprintf("rank-%d.json", rank) }

// WriteFile writes d to dir/FileName(d.Rank), replacing what was there
// at once (through a temporary file and a rename), so that a reader never
// sees half a file.
func (d *Dump) WriteFile(dir string) error {
	b, err := json.MarshalIndent(d, "", " ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".rank-*.json")
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(dir, FileName(d.Rank)))
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("flight: write trace of rank %d: %w", d.Rank, err)
	}
	return nil
}

// ReadFile reads a trace file written by WriteFile.
func ReadFile(name string) (*Dump, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	d := new(Dump)
	if err := json.Unmarshal(b, d); err != nil {
		return nil, fmt.Errorf("flight: %s: %w", name, err)
	}
	return d, nil
}

// opJSON is the file form of an Op.
type opJSON struct {
	ID        uint64    `json:"id"`
	Comm      uint64    `json:"comm"`
	Seq       uint64    `json:"seq"`
	Name      string    `json:"name"`
	Algorithm string    `json:"algorithm,omitempty"`
	DType     string    `json:"dtype,omitempty"`
	Count     int64     `json:"count"`
	Bytes     int64     `json:"bytes"`
	Start     time.Time `json:"start"`
	End       time.Time `json:"end,omitzero"`
	State     string    `json:"state"`
	Err       string    `json:"err,omitempty"`
	Step      int       `json:"step"`
	Peer      int       `json:"peer"`
	Dir       string    `json:"dir,omitempty"`
	Peers     []int     `json:"peers"`
	PathCells []uint64  `json:"path_cells,omitempty"`
	PathBytes []uint64  `json:"path_bytes,omitempty"`
	Reposts   uint64    `json:"reposts,omitempty"`
	GiveUps   uint64    `json:"give_ups,omitempty"`
	Resets    uint64    `json:"resets,omitempty"`
}

// MarshalJSON writes the file form of o.
func (o Op) MarshalJSON() ([]byte, error) {
	j := opJSON{ID: o.ID, Comm: o.Comm, Seq: o.Seq, Name: o.Name, Algorithm: o.Algorithm, DType: o.DType,
		Count: o.Count, Bytes: o.Bytes, Start: o.Start, End: o.End, State: o.State.String(), Err: o.Err,
		Step: o.Step, Peer: o.Peer, Dir: o.Dir.String(), Peers: o.Peers(),
		Reposts: o.Traffic.Reposts, GiveUps: o.Traffic.GiveUps, Resets: o.Traffic.Resets}
	paths := 0
	for i := range MaxPaths {
		if o.Traffic.Cells[i] != 0 || o.Traffic.Bytes[i] != 0 {
			paths = i + 1
		}
	}
	if paths > 0 {
		j.PathCells, j.PathBytes = o.Traffic.Cells[:paths], o.Traffic.Bytes[:paths]
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads the file form of an Op.
func (o *Op) UnmarshalJSON(b []byte) error {
	var j opJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*o = Op{ID: j.ID, Comm: j.Comm, Seq: j.Seq, Name: j.Name, Algorithm: j.Algorithm, DType: j.DType,
		Count: j.Count, Bytes: j.Bytes, Start: j.Start, End: j.End, Err: j.Err,
		Step: j.Step, Peer: j.Peer}
	st := slices.Index(stateNames[:], j.State)
	if st < 0 {
		return fmt.Errorf("flight: operation %d: unknown state %q", j.ID, j.State)
	}
	dir := slices.Index(dirNames[:], j.Dir)
	if dir < 0 {
		return fmt.Errorf("flight: operation %d: unknown direction %q", j.ID, j.Dir)
	}
	o.State, o.Dir = State(st), Dir(dir)
	for _, p := range j.Peers {
		o.addPeer(p)
	}
	if len(j.PathCells) > MaxPaths || len(j.PathBytes) > MaxPaths {
		return fmt.Errorf("flight: operation %d: more than %d paths", j.ID, MaxPaths)
	}
	copy(o.Traffic.Cells[:], j.PathCells)
	copy(o.Traffic.Bytes[:], j.PathBytes)
	o.Traffic.Reposts, o.Traffic.GiveUps, o.Traffic.Resets = j.Reposts, j.GiveUps, j.Resets
	return nil
}
