package netlab

import (
	"fmt"
	"regexp"
	"time"
)

// Config describes a lab. The zero value of every field but Name means its
// default.
type Config struct {
	// Name is for people: it starts the lab's ID and every namespace
	// name. Labs of the same name can be up at once; a random tag in the
	// ID tells them apart. 1 to 12 lower-case letters and digits; default
	// "lab".
	Name string
	// Hosts is the number of hosts, 2 to 64 (default 2).
	Hosts int
	// Spines is the number of spines, 1 to 16 (default 4).
	Spines int
	// SpineRate is the rate of every spine link, in each direction (default
	// 100 Mbit/s). Unlimited leaves the links unshaped.
	SpineRate Rate
	// HostRate is the rate of every host link, in each direction (default
	// Unlimited).
	HostRate Rate
	// Congestion is the TCP congestion control of the hosts, such as
	// "cubic" or "bbr" (default: what the kernel gives a new namespace).
	Congestion string
	// RTOMin is the hosts' minimum TCP retransmission timeout, set on
	// their routes (default: the kernel's, 200ms). A fabric this fast
	// needs far less, and a lost tail then costs less than a soft timeout.
	RTOMin time.Duration
	// QueueDelay sizes each shaped link's queue: the bytes its rate sends
	// in this time (default 20ms). A deeper queue trades loss for delay.
	QueueDelay time.Duration
}

// Defaults of Config.
const (
	DefaultName       = "lab"
	DefaultHosts      = 2
	DefaultSpines     = 4
	DefaultSpineRate  = 100 * Mbit
	DefaultQueueDelay = 20 * time.Millisecond
)

// Limits of Config.
const (
	MaxHosts  = 64
	MaxSpines = 16
)

var (
	namePattern       = regexp.MustCompile(`^[a-z0-9]{1,12}$`)
	congestionPattern = regexp.MustCompile(`^[a-z0-9_]{1,16}$`)
)

// resolve checks c and fills in the defaults.
func (c *Config) resolve() error {
	if c.Name == "" {
		c.Name = DefaultName
	}
	if c.Hosts == 0 {
		c.Hosts = DefaultHosts
	}
	if c.Spines == 0 {
		c.Spines = DefaultSpines
	}
	if c.SpineRate == 0 {
		c.SpineRate = DefaultSpineRate
	}
	if c.HostRate == 0 {
		c.HostRate = Unlimited
	}
	if c.QueueDelay == 0 {
		c.QueueDelay = DefaultQueueDelay
	}
	switch {
	case !namePattern.MatchString(c.Name):
		return fmt.Errorf("%w: name %q: want 1 to 12 lower-case letters and digits", ErrConfig, c.Name)
	case c.Hosts < 2 || c.Hosts > MaxHosts:
		return fmt.Errorf("%w: %d hosts: want 2 to %d", ErrConfig, c.Hosts, MaxHosts)
	case c.Spines < 1 || c.Spines > MaxSpines:
		return fmt.Errorf("%w: %d spines: want 1 to %d", ErrConfig, c.Spines, MaxSpines)
	case c.SpineRate < Unlimited || c.HostRate < Unlimited:
		return fmt.Errorf("%w: rates %v and %v: want positive rates or Unlimited", ErrConfig, c.SpineRate, c.HostRate)
	case c.Congestion != "" && !congestionPattern.MatchString(c.Congestion):
		return fmt.Errorf("%w: congestion control %q: want a name such as cubic", ErrConfig, c.Congestion)
	case c.RTOMin < 0 || c.RTOMin > time.Second:
		return fmt.Errorf("%w: minimum retransmission timeout %v: want 0 (the kernel's) to 1s", ErrConfig, c.RTOMin)
	case c.QueueDelay < time.Millisecond || c.QueueDelay > 10*time.Second:
		return fmt.Errorf("%w: queue delay %v: want 1ms to 10s", ErrConfig, c.QueueDelay)
	}
	return nil
}
