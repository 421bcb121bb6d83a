package collectives

import (
	"fmt"
	"strings"
)

// Algorithm names a collective algorithm.
type Algorithm uint8

// The algorithms. Each collective implements some of them:
//
//	AllReduce              Ring, RecursiveDoubling, HalvingDoubling
//	AllGather, AllGatherV  Ring, RecursiveDoubling
//	ReduceScatter          Ring, HalvingDoubling
//	Broadcast, Reduce      Chain, Tree
//	AllToAll, AllToAllV    Pairwise
//	Barrier                Dissemination
//	Gather, GatherV        Tree, Linear
//	Scatter, ScatterV      Tree, Linear
//	ReduceScatterV         Ring, HalvingDoubling
//
// and all have Shared, for ranks on one host; AllReduce, AllGather,
// ReduceScatter, AllToAll, Broadcast and Reduce also have Hierarchical, for
// ranks on several hosts with several on each.
//
// Every algorithm handles every world size; the ones built on powers of
// two first fold the surplus ranks into partners.
const (
	// Auto chooses by message size and world size (see choose).
	Auto Algorithm = iota
	// Ring: reduce-scatter then all-gather around a ring, pipelined in
	// chunks; bandwidth-optimal, 2(n-1) latency steps.
	Ring
	// RecursiveDoubling: log2(n) exchanges of the whole buffer; for
	// small messages.
	RecursiveDoubling
	// HalvingDoubling: Rabenseifner's recursive-halving reduce-scatter
	// and recursive-doubling all-gather; for medium messages.
	HalvingDoubling
	// Pairwise: n-1 steps, each sending to rank+s and receiving from
	// rank-s.
	Pairwise
	// Chain: a pipeline from the root along the ranks, in chunks; for
	// large broadcasts and reductions.
	Chain
	// Tree: a binomial tree rooted at the root; for small ones.
	Tree
	// Dissemination: log2(n) rounds, each to rank+2^k.
	Dissemination
	// Shared: through memory the ranks share, in a pipeline of phases
	// separated by barriers (see shared.go); every collective has it.
	// Auto chooses it whenever the group's ranks all reach each other
	// over shm; elsewhere forcing it means Auto.
	Shared
	// Hierarchical: combine within each host through shared memory, then
	// across hosts one slice per local rank, then gather within each host
	// (see hierarchical.go). Auto chooses it for the collectives that have
	// it when the group spans hosts with the same number (at least two) of
	// ranks on each; elsewhere forcing it means Auto.
	Hierarchical
	// Linear: the root exchanges one message with every other rank
	// directly; for large gathers and scatters, where a tree would copy
	// every block through the ranks in between.
	Linear

	lastAlgorithm = Linear
)

var algoNames = [...]string{"auto", "ring", "recursive-doubling", "halving-doubling", "pairwise", "chain", "tree", "dissemination", "shared", "hierarchical", "linear"}

// String returns the algorithm's name as ParseAlgorithm accepts it.
func (a Algorithm) String() string {
	if int(a) < len(algoNames) {
		return algoNames[a]
	}
	return "algorithm(" + itoa(int(a)) + ")"
}

// ParseAlgorithm parses an algorithm name (case-insensitive; "" is
// Auto). The error wraps ErrUnknownAlgorithm.
func ParseAlgorithm(s string) (Algorithm, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "" {
		return Auto, nil
	}
	for i, n := range algoNames {
		if n == t {
			return Algorithm(i), nil
		}
	}
	return Auto, fmt.Errorf("%w %q: want one of %s", ErrUnknownAlgorithm, s, strings.Join(algoNames[:], ", "))
}

// kind is the collective an operation is.
type kind uint8

const (
	kAllReduce kind = iota + 1
	kAllGather
	kAllGatherV
	kReduceScatter
	kAllToAll
	kAllToAllV
	kBroadcast
	kReduce
	kBarrier
	kGather
	kGatherV
	kScatter
	kScatterV
	kReduceScatterV
)

var kindNames = [...]string{"none", "AllReduce", "AllGather", "AllGatherV", "ReduceScatter", "AllToAll", "AllToAllV", "Broadcast", "Reduce", "Barrier",
	"Gather", "GatherV", "Scatter", "ScatterV", "ReduceScatterV"}

func (k kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "collective(" + itoa(int(k)) + ")"
}

func (k kind) reduces() bool {
	return k == kAllReduce || k == kReduceScatter || k == kReduce || k == kReduceScatterV
}

func (k kind) rooted() bool {
	return k == kBroadcast || k == kReduce || k == kGather || k == kGatherV || k == kScatter || k == kScatterV
}

// varies reports whether k takes a vector of counts that every rank must
// pass alike, which the fingerprint then covers by its hash (AllToAllV's
// counts differ between ranks by nature).
func (k kind) varies() bool {
	return k == kAllGatherV || k == kGatherV || k == kScatterV || k == kReduceScatterV
}

// implements reports whether collective k has algorithm a.
func (k kind) implements(a Algorithm) bool {
	switch k {
	case kAllReduce:
		return a == Ring || a == RecursiveDoubling || a == HalvingDoubling || a == Hierarchical
	case kAllGather:
		return a == Ring || a == RecursiveDoubling || a == Hierarchical
	case kAllGatherV:
		return a == Ring || a == RecursiveDoubling
	case kReduceScatter:
		return a == Ring || a == HalvingDoubling || a == Hierarchical
	case kReduceScatterV:
		return a == Ring || a == HalvingDoubling
	case kGather, kGatherV, kScatter, kScatterV:
		return a == Tree || a == Linear
	case kBroadcast, kReduce:
		return a == Chain || a == Tree || a == Hierarchical
	case kAllToAll:
		return a == Pairwise || a == Hierarchical
	case kAllToAllV:
		return a == Pairwise
	case kBarrier:
		return a == Dissemination
	}
	return false
}

// Size thresholds of the automatic choice, in bytes. Latency-bound
// algorithms win while a message is small compared with what a ring moves
// per step, so the ring thresholds grow with the world size.
const (
	smallAllReduce     = 32 << 10  // below: recursive doubling
	ringPerRank        = 128 << 10 // ring from n × this on
	smallAllGather     = 32 << 10  // per rank; below: recursive doubling
	smallReduceScatter = 64 << 10  // per rank; below: halving-doubling
	smallRooted        = 64 << 10  // below: tree; from it on: chain
	smallGather        = 32 << 10  // per rank; below: tree; from it on: linear
)

// choose picks the algorithm for collective k moving bytes (the whole
// vector: AllReduce's, AllGather's output, ReduceScatter's input, the
// root's buffer, Gather's and Scatter's at the root) over n ranks, honouring forced when k implements it.
func choose(k kind, forced Algorithm, n, bytes int) Algorithm {
	if forced != Auto && k.implements(forced) {
		return forced
	}
	switch k {
	case kAllReduce:
		switch {
		case bytes < smallAllReduce:
			return RecursiveDoubling
		case bytes < n*ringPerRank || n == 2:
			// Two ranks: both move the same halves in two exchanges,
			// the ring only cuts them into more messages (a 64 MiB
			// AllReduce over tcp took 44–58 ms this way, 59–82 ms by
			// the ring).
			return HalvingDoubling
		}
		return Ring
	case kAllGather, kAllGatherV:
		if bytes < n*smallAllGather {
			return RecursiveDoubling
		}
		return Ring
	case kReduceScatter, kReduceScatterV:
		if bytes < n*smallReduceScatter {
			return HalvingDoubling
		}
		return Ring
	case kBroadcast, kReduce:
		if bytes < smallRooted {
			return Tree
		}
		return Chain
	case kAllToAll, kAllToAllV:
		return Pairwise
	case kGather, kGatherV, kScatter, kScatterV:
		// A tree takes log2(n) steps instead of n-1 at the root, but
		// copies every block through the ranks in between.
		if bytes < n*smallGather {
			return Tree
		}
		return Linear
	}
	return Dissemination
}
