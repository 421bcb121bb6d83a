package launcher

import (
	"fmt"
	"strconv"
)

// cellrun in a pod of a Kubernetes Indexed Job (deploy/kubernetes): every
// pod runs the same command line, and Kubernetes numbers the pods in
// JOB_COMPLETION_INDEX, which is this node's --node-rank when the command
// line does not give one. The pods reach node 0 through the Job's headless
// Service, whose DNS names each pod <job>-<index>.<service>: that name,
// given to every pod as --rdzv-endpoint, is where node 0 serves etcd.

// EnvCompletionIndex is the index Kubernetes gives each pod of an Indexed
// Job, 0..completions-1.
const EnvCompletionIndex = "JOB_COMPLETION_INDEX"

// fromKubernetes takes --node-rank from the pod's completion index when the
// command line does not give it.
func (c *Config) fromKubernetes(changed func(string) bool, lookup func(string) (string, bool)) error {
	v, ok := lookup(EnvCompletionIndex)
	if !ok || v == "" || changed("node-rank") {
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n >= MaxNodes {
		return &FlagError{Flag: "--node-rank", Value: EnvCompletionIndex + "=" + strconv.Quote(v),
			Want: fmt.Sprintf("want the pod's index of an Indexed Job, 0..%d", MaxNodes-1)}
	}
	c.NodeRank = n
	return nil
}
