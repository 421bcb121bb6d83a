// Command moe runs the token shuffle of a mixture-of-experts layer over
// RDMACell: each rank owns one expert and a batch of tokens; a gate routes
// every token to an expert, an all-to-all sends the tokens to the ranks of
// their experts, the experts compute, and a second all-to-all brings the
// results back to where the tokens came from. Every rank then checks its
// outputs against a serial computation of the same layer.
//
//	go run ./launcher/cellrun -n 4 ./examples/moe
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/rdmacell/rdmacell/collectives"
)

func main() {
	n := flag.Int("tokens", 256, "tokens per rank")
	seed := flag.Uint64("seed", 1, "seed of the tokens and the weights")
	timeout := flag.Duration("timeout", 2*time.Minute, "give up after this long")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := run(ctx, *n, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "moe:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, n int, seed uint64) (err error) {
	g, err := collectives.Open(ctx, collectives.Options{})
	if err != nil {
		return err
	}
	defer func() {
		if gerr := g.Close(); gerr != nil && err == nil {
			err = gerr
		}
	}()
	return moe(ctx, g, n, seed)
}

func moe(ctx context.Context, g *collectives.Group, n int, seed uint64) error {
	rank, size := g.Rank(), g.Size()
	experts := size // expert e lives on rank e
	gate := tokensGate(seed, experts)
	in := tokens(seed, rank, n)

	// Route: group this rank's tokens by destination, keeping where each
	// came from so that the results can be put back in place.
	perm := make([]int, 0, n) // perm[k] = source index of the k-th token sent
	sendCounts := make([]int, size)
	for e := range experts {
		for t := range n {
			if route(gate, experts, in[t*dim:(t+1)*dim]) == e {
				perm = append(perm, t)
				sendCounts[e] += dim
			}
		}
	}
	send := make([]float32, 0, n*dim)
	for _, t := range perm {
		send = append(send, in[t*dim:(t+1)*dim]...)
	}

	// Step 1: every rank learns how much it will receive from each other:
	// an AllToAll of one count per pair.
	counts := make([]int64, size)
	for e, c := range sendCounts {
		counts[e] = int64(c)
	}
	recvCounts64 := make([]int64, size)
	if err := collectives.AllToAll(ctx, g, counts, recvCounts64); err != nil {
		return fmt.Errorf("exchange counts: %w", err)
	}
	recvCounts, total := make([]int, size), 0
	for r, c := range recvCounts64 {
		recvCounts[r] = int(c)
		total += int(c)
	}

	// Step 2: the tokens themselves, to their experts.
	mine := make([]float32, total)
	if err := collectives.AllToAllV(ctx, g, send, sendCounts, mine, recvCounts); err != nil {
		return fmt.Errorf("dispatch tokens: %w", err)
	}

	// Step 3: this rank's expert processes every token it received.
	w := newLinear(seed + 100 + uint64(rank))
	done := make([]float32, total)
	for t := 0; t < total; t += dim {
		expert(w, mine[t:t+dim], done[t:t+dim])
	}

	// Step 4: the results go back the way the tokens came, so the counts
	// swap roles; then undo the routing permutation.
	back := make([]float32, len(send))
	if err := collectives.AllToAllV(ctx, g, done, recvCounts, back, sendCounts); err != nil {
		return fmt.Errorf("combine results: %w", err)
	}
	out := make([]float32, n*dim)
	for k, t := range perm {
		copy(out[t*dim:(t+1)*dim], back[k*dim:(k+1)*dim])
	}

	// Check against the layer computed serially on this rank: the same
	// arithmetic in the same order, so the bits must match.
	wrong := int64(0)
	want := make([]float32, dim)
	for t := range n {
		tok := in[t*dim : (t+1)*dim]
		expert(newLinear(seed+100+uint64(route(gate, experts, tok))), tok, want)
		for j := range dim {
			if out[t*dim+j] != want[j] {
				wrong++
				break
			}
		}
	}
	// Every rank learns the job-wide verdict, so all exit the same way.
	load := []int64{int64(total / dim), wrong}
	loads := make([]int64, 2*size)
	if err := collectives.AllGather(ctx, g, load, loads); err != nil {
		return fmt.Errorf("gather results: %w", err)
	}
	var bad int64
	perExpert := make([]int64, size)
	for r := range size {
		perExpert[r], bad = loads[2*r], bad+loads[2*r+1]
	}
	if rank == 0 {
		fmt.Printf("moe: %d ranks, %d tokens, tokens per expert %v\n", size, n*size, perExpert)
	}
	if bad != 0 {
		return fmt.Errorf("%d tokens differ from the serial computation", bad)
	}
	if rank == 0 {
		fmt.Println("moe: every output matches the serial computation")
	}
	return nil
}

// tokensGate is the gate matrix, one row of dim weights per expert.
func tokensGate(seed uint64, experts int) []float32 {
	return tokens(seed+1000, 0, experts)
}
