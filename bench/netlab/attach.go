package netlab

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Discover finds the lab called name that is up on this machine, possibly
// built by another process (`netlab up`), so that it can be inspected,
// given faults by hand and taken down. Its hosts and spines are read from
// its namespaces, its nominal rates from the shaping of its links: the
// fastest spine link gives SpineRate, so a fault in progress does not
// become the norm.
func Discover(ctx context.Context, name string) (*Lab, error) {
	cfg := Config{Name: name}
	if name == "" {
		cfg.Name = DefaultName
	}
	if !namePattern.MatchString(cfg.Name) {
		return nil, fmt.Errorf("%w: name %q: want 1 to 12 lower-case letters and digits", ErrConfig, cfg.Name)
	}
	all, err := listNamespaces(ctx)
	if err != nil {
		return nil, err
	}
	prefix := labPrefix(cfg.Name)
	leaves := 0
	for _, ns := range all {
		node, ok := strings.CutPrefix(ns, prefix)
		if !ok {
			continue
		}
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
		return nil, fmt.Errorf("netlab: no complete lab %q here (%d hosts, %d leaves, %d spines)", cfg.Name, cfg.Hosts, leaves, cfg.Spines)
	}
	cfg.SpineRate, cfg.HostRate = Unlimited, Unlimited
	for s := range cfg.Spines {
		r, queue, err := readShaping(ctx, cfg.leafNS(0), leafSpineIf(s))
		if err != nil {
			return nil, err
		}
		if r > cfg.SpineRate {
			cfg.SpineRate, cfg.QueueDelay = r, queue
		}
	}
	if cfg.HostRate, _, err = readShaping(ctx, cfg.hostNS(0), hostIfName); err != nil {
		return nil, err
	}
	if err := cfg.resolve(); err != nil {
		return nil, err
	}
	l := newLab(cfg)
	for s := range cfg.Spines {
		for leaf := range 2 {
			link := SpineLink{Spine: s, Leaf: leaf}
			if l.rates[link.index()], _, err = readShaping(ctx, cfg.leafNS(leaf), leafSpineIf(s)); err != nil {
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
	fmt.Fprintf(&b, "lab %q: %d hosts, 2 leaves, %d spines; spine links %v, host links %v, queues %v\n",
		l.cfg.Name, l.cfg.Hosts, l.cfg.Spines, l.cfg.SpineRate, l.cfg.HostRate, l.cfg.QueueDelay)
	for h := range l.cfg.Hosts {
		fmt.Fprintf(&b, "  host %d: %s, namespace %s, hostname %s, leaf %d\n",
			h, hostAddr(h), l.cfg.hostNS(h), l.HostName(h), leafOf(h))
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
