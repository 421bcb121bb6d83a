package bench

import "strings"

// collective describes one benchmarked operation.
type collective struct {
	name    string // as the first argument names it
	csvName string // as the reference benchmarks' CSV names it
	reduces bool   // takes -o
	rooted  bool   // takes -r
	blocks  bool   // the count is cut in one block per rank
	// busFactor turns algorithm bandwidth into bus bandwidth, as
	// nccl-tests does, so that the figure compares with the link speed
	// whatever the number of ranks.
	busFactor func(n float64) float64
}

func ring(n float64) float64     { return (n - 1) / n }
func twoRings(n float64) float64 { return 2 * (n - 1) / n }
func one(float64) float64        { return 1 }

// Collectives are the operations cellbench measures, in nccl-tests' order.
var Collectives = []collective{
	{name: "allreduce", csvName: "allreduce", reduces: true, busFactor: twoRings},
	{name: "allgather", csvName: "allgather", blocks: true, busFactor: ring},
	{name: "alltoall", csvName: "alltoall", blocks: true, busFactor: ring},
	{name: "reducescatter", csvName: "reduce_scatter", reduces: true, blocks: true, busFactor: ring},
	{name: "broadcast", csvName: "bcast", rooted: true, busFactor: one},
	{name: "reduce", csvName: "reduce", reduces: true, rooted: true, busFactor: one},
	{name: "scatter", csvName: "scatter", rooted: true, blocks: true, busFactor: ring},
	{name: "gather", csvName: "gather", rooted: true, blocks: true, busFactor: ring},
	{name: "sendrecv", csvName: "sendrecv", busFactor: one},
}

func collectiveByName(s string) *collective {
	for i := range Collectives {
		if Collectives[i].name == strings.ToLower(s) {
			return &Collectives[i]
		}
	}
	return nil
}

func collectiveNames() string {
	var names []string
	for _, c := range Collectives {
		names = append(names, c.name)
	}
	return strings.Join(names, ", ")
}

// Name returns the collective's name as cellbench's first argument.
func (c collective) Name() string { return c.name }
