package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"math"
	"os"
	"path/filepath"

	"github.com/rdmacell/rdmacell/collectives"
)

// A checkpoint is everything the training loop needs to go on as if it
// had never stopped: the weights, where it is (the epoch in progress and
// how many of its steps are done), and each rank's sum of the epoch's
// losses so far, so that the epoch's loss is printed as an uninterrupted
// run prints it. Nothing else is state: the optimiser is plain SGD, and
// the order of the samples is drawn afresh from the seed and the epoch
// (epochOrder), so there is no random generator to save.
//
// Rank 0 writes it after a step, when every rank's gradients of that step
// are in its weights, whatever the others did since: the weights are the
// same on every rank. On resume rank 0 reads it and broadcasts it, as it
// broadcasts the initial weights, so the other ranks need not see the
// file (on another node they may not). The file is replaced by a rename,
// so a rank killed while writing leaves the previous checkpoint whole.

// checkpointName is the file in the checkpoint directory.
const checkpointName = "checkpoint"

// checkpointMagic starts the file and names its layout.
var checkpointMagic = [8]byte{'R', 'C', 'T', 'R', 'A', 'I', 'N', 1}

// Bounds of a checkpoint's counts: far beyond what the example makes,
// they keep a damaged or hostile file from asking for gigabytes.
const (
	maxCheckpointRanks  = 1 << 16
	maxCheckpointParams = 1 << 26
)

// checkpoint is the training state after a step.
type checkpoint struct {
	fingerprint uint64    // what the run must share with the one that wrote it
	epoch       int       // the epoch in progress, from 1; epochs+1 when done
	step        int       // steps of that epoch done
	totals      []float64 // each rank's sum of the epoch's losses so far
	params      []float32
}

// fingerprint is a hash of what must not change for a checkpoint to be
// resumed bitwise: the dataset, the world, the batches, the update and the
// way gradients are reduced. The number of epochs may change.
func fingerprint(cfg config, size int) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "seed=%d samples=%d batch=%d bucket=%d lr=%v size=%d exact=%t reproducible=%t",
		cfg.seed, cfg.samples, cfg.batch, cfg.bucket, cfg.lr, size, cfg.exact, cfg.reproducible)
	return h.Sum64()
}

// encode lays c out as the file holds it: magic, fingerprint, epoch,
// step, ranks and params counts, the totals, the params, all little
// endian, and a CRC-32C of everything before it.
func (c *checkpoint) encode() []byte {
	b := make([]byte, 0, 8+8+4*4+8*len(c.totals)+4*len(c.params)+4)
	b = append(b, checkpointMagic[:]...)
	b = binary.LittleEndian.AppendUint64(b, c.fingerprint)
	for _, n := range []int{c.epoch, c.step, len(c.totals), len(c.params)} {
		b = binary.LittleEndian.AppendUint32(b, uint32(n))
	}
	for _, t := range c.totals {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(t))
	}
	for _, p := range c.params {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(p))
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// errCorrupt is what decode finds wrong with a file that is not a whole
// checkpoint.
var errCorrupt = errors.New("not a whole checkpoint")

// decodeCheckpoint reads what encode wrote, and refuses anything else.
func decodeCheckpoint(b []byte) (*checkpoint, error) {
	const header = 8 + 8 + 4*4
	if len(b) < header+4 || [8]byte(b[:8]) != checkpointMagic {
		return nil, fmt.Errorf("%w: no checkpoint header", errCorrupt)
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, crcTable) != sum {
		return nil, fmt.Errorf("%w: checksum mismatch", errCorrupt)
	}
	c := &checkpoint{fingerprint: binary.LittleEndian.Uint64(b[8:])}
	u := func(i int) int { return int(binary.LittleEndian.Uint32(b[16+4*i:])) }
	c.epoch, c.step = u(0), u(1)
	ranks, params := u(2), u(3)
	if ranks < 1 || ranks > maxCheckpointRanks || params > maxCheckpointParams {
		return nil, fmt.Errorf("%w: %d ranks, %d parameters", errCorrupt, ranks, params)
	}
	if len(body) != header+8*ranks+4*params {
		return nil, fmt.Errorf("%w: %d bytes for %d ranks and %d parameters", errCorrupt, len(b), ranks, params)
	}
	at := header
	c.totals = make([]float64, ranks)
	for i := range c.totals {
		c.totals[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[at:]))
		at += 8
	}
	c.params = make([]float32, params)
	for i := range c.params {
		c.params[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[at:]))
		at += 4
	}
	return c, nil
}

// save replaces dir's checkpoint with c: it writes a temporary file,
// flushes it to disk, renames it over the old one and flushes the
// directory, so that the file is always either the old checkpoint or c.
func (c *checkpoint) save(dir string) error {
	tmp := filepath.Join(dir, checkpointName+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	_, err = f.Write(c.encode())
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, checkpointName))
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// loadCheckpoint reads dir's checkpoint; nil, nil when there is none yet.
// A checkpoint of another run (another fingerprint, world size or model)
// is an error, not a fresh start: resuming it would not give the weights
// the command line promises.
func loadCheckpoint(dir string, fp uint64, ranks, params int) (*checkpoint, error) {
	path := filepath.Join(dir, checkpointName)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	c, err := decodeCheckpoint(b)
	switch {
	case err != nil:
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	case c.fingerprint != fp:
		return nil, fmt.Errorf("checkpoint %s is of a run with other settings (seed, samples, batch, bucket, lr, ranks, -exact or -reproducible): remove it to start afresh", path)
	case len(c.totals) != ranks || len(c.params) != params:
		return nil, fmt.Errorf("checkpoint %s holds %d ranks and %d parameters, want %d and %d", path, len(c.totals), len(c.params), ranks, params)
	case c.epoch < 1:
		return nil, fmt.Errorf("checkpoint %s: epoch %d, want at least 1", path, c.epoch)
	}
	return c, nil
}

// progress is where the training loop starts, and how it saves itself.
type progress struct {
	epoch, step int       // the first step to run is step of epoch
	totals      []float64 // the ranks' loss sums of that epoch so far
	fp          uint64
}

// resume is where training starts: from rank 0's checkpoint if it has
// one, else from the start; either way with rank 0's weights, which it
// broadcasts. Every rank returns the same progress, or an error.
func resume(ctx context.Context, cfg config, g *collectives.Group, model *mlp, steps int) (*progress, error) {
	p := &progress{epoch: 1, totals: make([]float64, g.Size()), fp: fingerprint(cfg, g.Size())}
	// found, epoch, step; found is -1 when rank 0 cannot resume.
	head := make([]int64, 3)
	var loadErr error
	if g.Rank() == 0 && cfg.checkpointDir != "" {
		c, err := loadCheckpoint(cfg.checkpointDir, p.fp, g.Size(), len(model.params))
		if err == nil && c != nil && c.step > steps {
			err = fmt.Errorf("checkpoint in %s: step %d of an epoch of %d steps", cfg.checkpointDir, c.step, steps)
		}
		if err == nil {
			err = os.MkdirAll(cfg.checkpointDir, 0o755)
		}
		switch {
		case err != nil:
			head[0], loadErr = -1, err
		case c != nil:
			head[0], head[1], head[2] = 1, int64(c.epoch), int64(c.step)
			copy(model.params, c.params)
			copy(p.totals, c.totals)
		}
	}
	if err := collectives.Broadcast(ctx, g, head, head, 0); err != nil {
		return nil, fmt.Errorf("broadcast where training starts: %w", err)
	}
	if head[0] == -1 {
		if loadErr == nil {
			loadErr = errors.New("rank 0 cannot resume from its checkpoint")
		}
		return nil, loadErr
	}
	if err := collectives.Broadcast(ctx, g, model.params, model.params, 0); err != nil {
		return nil, fmt.Errorf("broadcast initial weights: %w", err)
	}
	if head[0] == 1 {
		if err := collectives.Broadcast(ctx, g, p.totals, p.totals, 0); err != nil {
			return nil, fmt.Errorf("broadcast the checkpoint's losses: %w", err)
		}
		p.epoch, p.step = int(head[1]), int(head[2])
		if g.Rank() == 0 {
			fmt.Printf("resuming from %s at epoch %d, step %d of %d\n", filepath.Join(cfg.checkpointDir, checkpointName), p.epoch, p.step, steps)
		}
	}
	return p, nil
}

// after is called by every rank once step done of epoch is applied, with
// the rank's loss sum of the epoch so far; every -checkpoint-every steps
// it gathers the ranks' sums and rank 0 saves the checkpoint.
func (p *progress) after(ctx context.Context, cfg config, g *collectives.Group, model *mlp, epoch, done, steps int, total float64) error {
	if cfg.checkpointDir == "" || ((epoch-1)*steps+done)%cfg.checkpointEvery != 0 {
		return nil
	}
	if err := collectives.AllGather(ctx, g, []float64{total}, p.totals); err != nil {
		return fmt.Errorf("gather the losses to checkpoint: %w", err)
	}
	if g.Rank() != 0 {
		return nil
	}
	c := checkpoint{fingerprint: p.fp, epoch: epoch, step: done, totals: p.totals, params: model.params}
	return c.save(cfg.checkpointDir)
}
