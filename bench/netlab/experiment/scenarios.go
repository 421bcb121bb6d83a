package experiment

import (
	"fmt"
	"slices"
	"time"

	"github.com/rdmacell/rdmacell/bench/netlab"
)

// Policies are the placements every experiment compares, in the order
// each trial runs them.
var Policies = []string{"adaptive", "ecmp", "spray"}

// Plan sizes the experiments.
type Plan struct {
	// Bytes per rank of each collective, and the measured and warm-up
	// iterations of each job.
	Bytes, Iters, Warmup int
	// Trials is how many times each policy runs each scenario.
	Trials int
	// RanksPerHost is the ranks per host of the hash-collision experiment.
	RanksPerHost int
	// Timeout bounds each job.
	Timeout time.Duration
	// Ops and Policies, if set, keep only the scenarios of these
	// collectives and only these policies (to chase one failure).
	Ops, Policies []string
}

// Scenario is one experiment: jobs of Op under Fault, RanksPerHost ranks
// on each host.
type Scenario struct {
	Name         string
	Experiment   int
	Op           string
	RanksPerHost int
	Fault        Fault
}

// The link every fixed fault hits: spine 0's link to leaf 1, the leaf of
// host 1, where the traffic from host 0 arrives.
var faultLink = netlab.SpineLink{Spine: 0, Leaf: 1}

// Scenarios returns the scenarios of the given experiments (1 to 5):
//
//  1. healthy fabric, AllReduce and AllToAll;
//  2. spine 0's link to leaf 1 at a tenth of its rate, both collectives;
//  3. the busiest spine link to leaf 1 down, on the leaf's side, a second
//     into a long AllReduce, for two seconds;
//  4. the busiest spine link to leaf 1 flapping (down 300ms, up 700ms)
//     through an AllReduce;
//  5. AllToAll with several ranks per host, whose connections ECMP hashes
//     onto the spines independently, so that some collide.
func Scenarios(experiments []int, p Plan) ([]Scenario, error) {
	var all []Scenario
	for _, e := range experiments {
		switch e {
		case 1:
			all = append(all,
				Scenario{Name: "healthy", Experiment: 1, Op: "allreduce"},
				Scenario{Name: "healthy", Experiment: 1, Op: "alltoall"})
		case 2:
			f := Fault{Kind: Degrade, Link: faultLink, Fraction: 0.1}
			all = append(all,
				Scenario{Name: "degraded", Experiment: 2, Op: "allreduce", Fault: f},
				Scenario{Name: "degraded", Experiment: 2, Op: "alltoall", Fault: f})
		case 3:
			all = append(all, Scenario{Name: "linkdown", Experiment: 3, Op: "allreduce",
				Fault: Fault{Kind: LinkDown, Link: faultLink, Busiest: true, After: time.Second, For: 2 * time.Second}})
		case 4:
			all = append(all, Scenario{Name: "flapping", Experiment: 4, Op: "allreduce",
				Fault: Fault{Kind: Flap, Link: faultLink, Busiest: true, After: 300 * time.Millisecond,
					Flap: netlab.Flap{Down: 300 * time.Millisecond, Up: 700 * time.Millisecond}}})
		case 5:
			all = append(all, Scenario{Name: "collisions", Experiment: 5, Op: "alltoall", RanksPerHost: p.RanksPerHost})
		default:
			return nil, fmt.Errorf("experiment: no experiment %d: want 1 to 5", e)
		}
	}
	return all, nil
}

// Trials lays out the jobs of the scenarios: for each scenario, trial
// after trial, every policy once, so that slow drifts of the machine hit
// the policies alike.
func Trials(scenarios []Scenario, p Plan, hosts int) []Trial {
	var ts []Trial
	for _, sc := range scenarios {
		bytes := p.Bytes
		if sc.Experiment == 3 {
			// Longer collectives: the failure falls inside one of them,
			// and the others say how long one takes without.
			bytes *= 2
		}
		if len(p.Ops) > 0 && !slices.Contains(p.Ops, sc.Op) {
			continue
		}
		for i := range p.Trials {
			for _, pol := range Policies {
				if len(p.Policies) > 0 && !slices.Contains(p.Policies, pol) {
					continue
				}
				ts = append(ts, Trial{
					Scenario: sc.Name, Policy: pol, Index: i, Op: sc.Op,
					Bytes: bytes, Iters: p.Iters, Warmup: p.Warmup,
					RanksPerHost: max(sc.RanksPerHost, 1), Hosts: hosts,
					Fault: sc.Fault, Timeout: p.Timeout,
				})
			}
		}
	}
	return ts
}
