package netlab

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// LinkBytes counts the bytes a spine link carried, as the spine's end of
// it counts them.
type LinkBytes struct {
	Link SpineLink
	// ToLeaf is what the spine sent to the leaf, FromLeaf what it got
	// from the leaf.
	ToLeaf, FromLeaf uint64
}

// SpineBytes reads the byte counters of every spine link, from
// /sys/class/net/*/statistics inside each spine's namespace, spine by
// spine and leaf by leaf.
func (l *Lab) SpineBytes(ctx context.Context) ([]LinkBytes, error) {
	var all []LinkBytes
	for s := range l.cfg.Spines {
		args := []string{"netns", "exec", l.id.spineNS(s), "cat"}
		for leaf := range 2 {
			dir := "/sys/class/net/" + l.id.spineLeafIf(leaf) + "/statistics/"
			args = append(args, dir+"tx_bytes", dir+"rx_bytes")
		}
		out, err := run(ctx, "ip", args...)
		if err != nil {
			return nil, fmt.Errorf("netlab: read counters of spine %d: %w", s, err)
		}
		f := strings.Fields(out)
		if len(f) != 4 {
			return nil, fmt.Errorf("netlab: counters of spine %d: want 4 numbers, got %q", s, out)
		}
		var n [4]uint64
		for i := range n {
			if n[i], err = strconv.ParseUint(f[i], 10, 64); err != nil {
				return nil, fmt.Errorf("netlab: counters of spine %d: %w", s, err)
			}
		}
		for leaf := range 2 {
			all = append(all, LinkBytes{Link: SpineLink{Spine: s, Leaf: leaf}, ToLeaf: n[2*leaf], FromLeaf: n[2*leaf+1]})
		}
	}
	return all, nil
}
