package netlab

import (
	"fmt"
	"strconv"
	"strings"
)

// Rate is a link rate in bits per second.
type Rate int64

// Rates.
const (
	// Unlimited is a link without shaping.
	Unlimited Rate = -1
	Kbit      Rate = 1000
	Mbit      Rate = 1000 * Kbit
	Gbit      Rate = 1000 * Mbit
)

// String writes r as tc would read it, such as "100mbit".
func (r Rate) String() string {
	switch {
	case r == Unlimited:
		return "unlimited"
	case r > 0 && r%Gbit == 0:
		return strconv.FormatInt(int64(r/Gbit), 10) + "gbit"
	case r > 0 && r%Mbit == 0:
		return strconv.FormatInt(int64(r/Mbit), 10) + "mbit"
	case r > 0 && r%Kbit == 0:
		return strconv.FormatInt(int64(r/Kbit), 10) + "kbit"
	}
	return strconv.FormatInt(int64(r), 10) + "bit"
}

// BytesPerSecond is r in bytes per second.
func (r Rate) BytesPerSecond() float64 { return float64(r) / 8 }

// Set parses s, such as "100mbit", "1gbit", "2500kbit" or "unlimited", so
// that a Rate can be a command-line flag.
func (r *Rate) Set(s string) error {
	v, err := ParseRate(s)
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// Type names the flag's value in help texts.
func (r *Rate) Type() string { return "rate" }

// ParseRate reads a rate: a positive number with a unit of bit, kbit,
// mbit or gbit (case-insensitive), or "unlimited".
func ParseRate(s string) (Rate, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "unlimited" {
		return Unlimited, nil
	}
	units := []struct {
		suffix string
		mult   Rate
	}{{"gbit", Gbit}, {"mbit", Mbit}, {"kbit", Kbit}, {"bit", 1}}
	for _, u := range units {
		if !strings.HasSuffix(t, u.suffix) {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSuffix(t, u.suffix), 64)
		if err != nil || f <= 0 || f*float64(u.mult) < 1 || f*float64(u.mult) > 1e13 {
			break
		}
		return Rate(f * float64(u.mult)), nil
	}
	return 0, fmt.Errorf("%w: rate %q: want a number with bit, kbit, mbit or gbit, or unlimited", ErrConfig, s)
}
