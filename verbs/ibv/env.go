package ibv

import (
	"os"
	"strconv"
	"strings"
)

// Environment knobs read by Open for options left zero. They let an
// operator pick the device, port and GID index of a job without changing
// its code; the GID index above all, because the right one differs
// between clusters.
const (
	// EnvDevice names the RDMA device (Options.Device).
	EnvDevice = "RDMACELL_IB_DEVICE"
	// EnvPort is the port number (Options.Port).
	EnvPort = "RDMACELL_IB_PORT"
	// EnvGIDIndex is the GID table index (Options.GIDIndex).
	EnvGIDIndex = "RDMACELL_IB_GID_INDEX"
)

// maxGIDIndex bounds GID indexes: ibverbs passes them in a uint8 to
// ibv_modify_qp.
const maxGIDIndex = 255

// OptionsFromEnv returns o with the fields it leaves zero filled from
// the environment (EnvDevice, EnvPort, EnvGIDIndex), so that an operator
// can pick the port of a job without changing its code and an explicit
// option still wins. A knob with a value that cannot be used is an
// *EnvError. Open itself reads no environment.
func OptionsFromEnv(o Options) (Options, error) { return OptionsFromLookup(o, os.LookupEnv) }

// OptionsFromLookup is OptionsFromEnv reading variables through lookup,
// for a caller that reads the environment its own way.
func OptionsFromLookup(o Options, lookup func(string) (string, bool)) (Options, error) {
	return applyEnv(o, lookup)
}

// applyEnv fills the fields of o that are unset from the environment
// read through lookup. An unusable value is an *EnvError naming the
// variable and its value, even when the option it feeds is set: a knob
// that is wrong is a mistake worth reporting.
func applyEnv(o Options, lookup func(string) (string, bool)) (Options, error) {
	if v, ok := knob(lookup, EnvDevice); ok {
		name := strings.TrimSpace(v)
		if strings.ContainsAny(name, "/ \t") {
			return o, &EnvError{Var: EnvDevice, Value: v, Want: "an RDMA device name such as mlx5_0"}
		}
		if o.Device == "" {
			o.Device = name
		}
	}
	if v, ok := knob(lookup, EnvPort); ok {
		p, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || p < 1 || p > maxPort {
			return o, &EnvError{Var: EnvPort, Value: v, Want: "a port number 1.." + strconv.Itoa(maxPort)}
		}
		if o.Port == 0 {
			o.Port = p
		}
	}
	if v, ok := knob(lookup, EnvGIDIndex); ok {
		i, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || i < 0 || i > maxGIDIndex {
			return o, &EnvError{Var: EnvGIDIndex, Value: v, Want: "a GID table index 0.." + strconv.Itoa(maxGIDIndex)}
		}
		if o.GIDIndex == nil {
			o.GIDIndex = &i
		}
	}
	return o, nil
}

// knob looks name up and treats a blank value as unset, as launchers
// commonly export knobs they have no value for.
func knob(lookup func(string) (string, bool), name string) (string, bool) {
	v, ok := lookup(name)
	if !ok || strings.TrimSpace(v) == "" {
		return "", false
	}
	return v, true
}
