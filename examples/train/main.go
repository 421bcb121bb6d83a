// Command train is data-parallel training in pure Go over RDMACell: every
// rank holds a copy of a small MLP, trains it on its shard of each global
// batch of a synthetic dataset, and averages the gradients with
// non-blocking, bucketed AllReduce that overlaps the backward pass, as
// PyTorch's DistributedDataParallel does. Rank 0 prints the loss of each
// epoch; at the end every rank checks that all ranks hold bitwise-identical
// weights and exits non-zero if they do not.
//
// Run it with the launcher, which starts the ranks and the rendezvous:
//
//	go run ./launcher/cellrun -n 4 ./examples/train
//
// Floating-point addition is not associative, so by default the weights'
// last bits depend on how the gradients were reduced: over shared memory
// or tcp, on 2 ranks or 4. --reproducible reduces every element in rank
// order (collectives.Options.Reproducible): the same hash over any
// transport for a given number of ranks. -checkpoint-dir makes rank 0
// save the training state every -checkpoint-every steps and every rank
// resume from it when it is there (see checkpoint.go): under
// cellrun --max-restarts, a job that lost a rank ends with the weights an
// uninterrupted run ends with, bit for bit. --exact sums every gradient
// exactly over the global batch and rounds it once (package
// collectives/exact, collectives.AllReduceAcc): the same hash on any
// number of ranks for the same global batch, e.g. -n 1 -batch 64 and
// -n 4 -batch 16.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rdmacell/rdmacell/collectives"
)

// config is the command line.
type config struct {
	epochs, batch, samples, bucket int
	lr                             float64
	seed                           uint64
	timeout                        time.Duration
	reproducible, exact, elastic   bool
	checkpointDir                  string
	checkpointEvery                int
}

func main() {
	var cfg config
	flag.IntVar(&cfg.epochs, "epochs", 8, "passes over the dataset")
	flag.IntVar(&cfg.batch, "batch", 32, "samples per rank per step (the global batch is this times the world size)")
	flag.IntVar(&cfg.samples, "samples", 8192, "size of the synthetic dataset")
	flag.IntVar(&cfg.bucket, "bucket", 1024, "gradients per AllReduce bucket, at least")
	flag.Float64Var(&cfg.lr, "lr", 0.1, "SGD learning rate")
	flag.Uint64Var(&cfg.seed, "seed", 1, "seed of the dataset and the initial weights")
	flag.DurationVar(&cfg.timeout, "timeout", 5*time.Minute, "give up after this long")
	flag.BoolVar(&cfg.reproducible, "reproducible", false, "reduce in a fixed order: the same weights whatever the transport or algorithm")
	flag.BoolVar(&cfg.exact, "exact", false, "sum gradients exactly: the same weights on any number of ranks for the same global batch (-batch × ranks)")
	flag.BoolVar(&cfg.elastic, "elastic", false, "when a rank dies, go on with the others (run under cellrun --elastic): they shrink the communicator and share the data among themselves")
	flag.StringVar(&cfg.checkpointDir, "checkpoint-dir", "", "rank 0 saves the training state in `DIR`/checkpoint, and the job resumes from it when it is there")
	flag.IntVar(&cfg.checkpointEvery, "checkpoint-every", 10, "with -checkpoint-dir: save every `K` steps")
	flag.Parse()
	if cfg.elastic && cfg.checkpointDir != "" {
		fmt.Fprintln(os.Stderr, "train: -elastic and -checkpoint-dir: choose one way to survive a lost rank")
		os.Exit(2)
	}
	if cfg.checkpointEvery < 1 {
		fmt.Fprintf(os.Stderr, "train: -checkpoint-every %d: want at least 1 step\n", cfg.checkpointEvery)
		os.Exit(2)
	}

	// Cancelling on a signal lets every pending collective return an
	// error, so the rank exits cleanly when the launcher stops the job.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()

	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "train:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg config) (err error) {
	// Zero Comm options: the rank, world size, job and rendezvous come
	// from the environment the launcher sets (RDMACELL_RANK and so on).
	g, err := collectives.Open(ctx, collectives.Options{Reproducible: cfg.reproducible, Exact: cfg.exact})
	if err != nil {
		return err
	}
	cfg.reproducible = g.Options().Reproducible // RDMACELL_REPRODUCIBLE too
	t := &team{world: g, g: g}
	defer func() {
		if terr := t.close(); terr != nil && err == nil {
			err = terr
		}
	}()
	return train(ctx, cfg, t)
}

func train(ctx context.Context, cfg config, t *team) error {
	data := synthetic(cfg.seed, cfg.samples, 16, 4)
	model := newMLP(cfg.seed+1, data.dim, 64, 32, data.classes)

	global := cfg.batch * t.size()
	steps := data.len() / global
	if steps == 0 {
		return fmt.Errorf("%d samples do not make one global batch of %d", data.len(), global)
	}
	// Start from rank 0's weights, as DDP does: every rank drew the same
	// ones already, but rank 0 alone reads the checkpoint.
	at, err := resume(ctx, cfg, t.g, model, steps)
	if err != nil {
		return err
	}
	t.sync = newGradSync(t.g, model, cfg.bucket)
	var exactSync *exactGrads
	if cfg.exact {
		exactSync = newExactGrads(model)
	}

	if t.rank() == 0 {
		fmt.Printf("training on %d ranks: %d samples, global batch %d, %d steps per epoch, %d gradient buckets\n",
			t.size(), data.len(), global, steps, len(t.sync.buckets))
	}

	x := make([]float32, cfg.batch*data.dim)
	y := make([]int, cfg.batch)
	// step trains on this rank's shard of the global batch at pos of the
	// epoch's order, and returns its loss.
	step := func(order []int, pos int) (float64, error) {
		mine := order[pos+t.rank()*cfg.batch:][:cfg.batch]
		for i, s := range mine {
			copy(x[i*data.dim:], data.row(s))
			y[i] = data.Y[s]
		}
		if exactSync != nil {
			// Each sample's share of the global mean, summed exactly.
			loss, dy := model.lossAndGrad(x, y, cfg.batch*t.size())
			for l := len(model.layers) - 1; l >= 0; l-- {
				dy = model.layers[l].backward(dy, cfg.batch)
			}
			if err := exactSync.sync(ctx, t.g, model); err != nil {
				return 0, err
			}
			model.step(float32(cfg.lr))
			return loss, nil
		}
		loss, dy := model.lossAndGrad(x, y, cfg.batch)
		// Backward, last layer first; each bucket starts averaging as
		// soon as its layers are done.
		for l := len(model.layers) - 1; l >= 0; l-- {
			dy = model.layers[l].backward(dy, cfg.batch)
			if err := t.sync.layerDone(ctx, l); err != nil {
				return 0, err
			}
		}
		if err := t.sync.wait(ctx); err != nil {
			return 0, err
		}
		model.step(float32(cfg.lr))
		return loss, nil
	}

	for epoch := at.epoch; epoch <= cfg.epochs; epoch++ {
		order := epochOrder(cfg.seed, epoch, data.len())
		total, done := 0.0, 0
		if epoch == at.epoch {
			total, done = at.totals[t.rank()], at.step
		}
		// pos is where the next global batch starts in the epoch's order:
		// the team may shrink, and its batch with it.
		for pos := done * global; pos+cfg.batch*t.size() <= data.len(); {
			loss, err := step(order, pos)
			if err != nil {
				if pos, err = t.recover(ctx, cfg, model, pos, err); err != nil {
					return err
				}
				continue
			}
			total += loss
			pos += cfg.batch * t.size()
			done++
			if err := at.after(ctx, cfg, t.g, model, epoch, done, steps, total); err != nil {
				return err
			}
		}

		// The epoch's loss over the whole dataset: the mean of the ranks'
		// means, which are over shards of equal size.
		mean := []float64{total / float64(max(done, 1))}
		for {
			err := collectives.AllReduce(ctx, t.g, mean, mean, collectives.Avg)
			if err == nil {
				break
			}
			if _, err = t.recover(ctx, cfg, model, 0, err); err != nil {
				return fmt.Errorf("average the loss: %w", err)
			}
			mean[0] = total / float64(max(done, 1))
		}
		if t.rank() == 0 {
			fmt.Printf("epoch %d loss %.4f\n", epoch, mean[0])
		}
	}

	for {
		hash, err := checkIdentical(ctx, t.g, model.params)
		if err == nil {
			if t.rank() == 0 {
				fmt.Printf("weights identical on all %d ranks (hash %#016x)\n", t.size(), hash)
			}
			return nil
		}
		if _, err = t.recover(ctx, cfg, model, 0, err); err != nil {
			return err
		}
	}
}
