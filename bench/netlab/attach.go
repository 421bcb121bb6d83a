package netlab

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Discover finds a lab that is up on this machine, possibly built by
// another process (`netlab up`, `netlab run`), so that it can be
// inspected and given faults by hand. query is the lab's ID or, if only
// one lab of that name is up, its name; "" means DefaultName. The lab's
// hosts and spines are read from its namespaces, its nominal rates from
// the shaping of its links: the fastest spine link gives SpineRate, so
// that a fault in progress does not become the norm.
func Discover(ctx context.Context, query string) (*Lab, error) {
	if query == "" {
		query = DefaultName
	}
	if err := checkQuery(query); err != nil {
		return nil, err
	}
	labs, err := labsUp(ctx)
	if err != nil {
		return nil, err
	}
	var found []labID
	for _, id := range sortedIDs(labs) {
		if id.matches(query) {
			found = append(found, id)
		}
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("netlab: no lab %q is up", query)
	case 1:
	default:
		ids := make([]string, len(found))
		for i, id := range found {
			ids[i] = id.String()
		}
		return nil, fmt.Errorf("%w: %d labs called %q are up (%s): name one by its ID", ErrConfig, len(found), query, strings.Join(ids, ", "))
	}
	id := found[0]
	cfg := Config{Name: id.name}
	leaves := 0
	for _, ns := range labs[id] {
		_, node, _ := parseNamespace(ns)
		switch {
		case strings.HasPrefix(node, "leaf"):
			leaves++
		case strings.HasPrefix(node, "h"):
			cfg.Hosts++
		case strings.HasPrefix(node, "s"):
			cfg.Spines++
		}
	}
	if leaves != 2 || cfg.Hosts < 2 || cfg.Spines < 1 {
		return nil, fmt.Errorf("netlab: lab %s is not complete (%d hosts, %d leaves, %d spines)", id, cfg.Hosts, leaves, cfg.Spines)
	}
	cfg.SpineRate, cfg.HostRate = Unlimited, Unlimited
	for s := range cfg.Spines {
		r, queue, err := readShaping(ctx, id.leafNS(0), id.leafSpineIf(s))
		if err != nil {
			return nil, err
		}
		if r > cfg.SpineRate {
			cfg.SpineRate, cfg.QueueDelay = r, queue
		}
	}
	if cfg.HostRate, _, err = readShaping(ctx, id.hostNS(0), id.hostIf()); err != nil {
		return nil, err
	}
	if err := cfg.resolve(); err != nil {
		return nil, err
	}
	l := newLab(cfg, id)
	for s := range cfg.Spines {
		for leaf := range 2 {
			link := SpineLink{Spine: s, Leaf: leaf}
			if l.rates[link.index()], _, err = readShaping(ctx, id.leafNS(leaf), id.leafSpineIf(s)); err != nil {
				return nil, err
			}
		}
	}
	return l, nil
}

// readShaping returns the rate of the tbf on dev in namespace ns and the
// queue delay it was built with, or Unlimited without a tbf.
func readShaping(ctx context.Context, ns, dev string) (Rate, time.Duration, error) {
	out, err := run(ctx, "tc", "-n", ns, "-j", "qdisc", "show", "dev", dev, "root")
	if err != nil {
		return 0, 0, err
	}
	var qdiscs []struct {
		Kind    string `json:"kind"`
		Options struct {
			Rate  float64 `json:"rate"`  // bytes per second
			Burst float64 `json:"burst"` // bytes
			Lat   float64 `json:"lat"`   // microseconds
		} `json:"options"`
	}
	if err := json.Unmarshal([]byte(out), &qdiscs); err != nil {
		return 0, 0, fmt.Errorf("netlab: qdisc of %s in %s: %w", dev, ns, err)
	}
	for _, q := range qdiscs {
		if q.Kind != "tbf" || q.Options.Rate <= 0 {
			continue
		}
		r := Rate(q.Options.Rate * 8)
		// tbf's latency is the queue less one bucket; the whole queue is
		// what Config.QueueDelay says.
		queue := time.Duration(q.Options.Lat)*time.Microsecond + time.Duration(q.Options.Burst/q.Options.Rate*1e9)
		return r, queue.Round(time.Millisecond), nil
	}
	return Unlimited, 0, nil
}

// Describe sums the lab up in a few lines: its nodes, addresses and rates.
func (l *Lab) Describe() string {
	var b strings.Builder
	owner := "detached"
	if l.id.owner != 0 {
		owner = fmt.Sprintf("owned by process %d", l.id.owner)
	}
	fmt.Fprintf(&b, "lab %s (%s): %d hosts, 2 leaves, %d spines; spine links %v, host links %v, queues %v\n",
		l.id, owner, l.cfg.Hosts, l.cfg.Spines, l.cfg.SpineRate, l.cfg.HostRate, l.cfg.QueueDelay)
	for h := range l.cfg.Hosts {
		fmt.Fprintf(&b, "  host %d: %s, namespace %s, hostname %s, leaf %d\n",
			h, hostAddr(h), l.id.hostNS(h), l.HostName(h), leafOf(h))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, r := range l.rates {
		if r != l.cfg.SpineRate {
			link := SpineLink{Spine: i / 2, Leaf: i % 2}
			fmt.Fprintf(&b, "  %v shaped to %v\n", link, r)
		}
	}
	return strings.TrimRight(b.String(), "\n") + "\n"
}
