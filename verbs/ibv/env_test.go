package ibv

import (
	"errors"
	"testing"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/stretchr/testify/require"
)

// lookupOf is an environment holding exactly env.
func lookupOf(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}
}

func intp(i int) *int { return &i }

func TestApplyEnv(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		env  map[string]string
		want Options
	}{
		{"nothing set", Options{}, nil, Options{}},
		{"all knobs", Options{}, map[string]string{EnvDevice: "mlx5_1", EnvPort: "2", EnvGIDIndex: "3"},
			Options{Device: "mlx5_1", Port: 2, GIDIndex: intp(3)}},
		{"spaces around values", Options{}, map[string]string{EnvDevice: " mlx5_0 ", EnvPort: " 1", EnvGIDIndex: "0 "},
			Options{Device: "mlx5_0", Port: 1, GIDIndex: intp(0)}},
		{"blank is unset", Options{}, map[string]string{EnvDevice: "", EnvPort: " ", EnvGIDIndex: ""}, Options{}},
		{"options win", Options{Device: "rocep1s0f0", Port: 1, GIDIndex: intp(1)},
			map[string]string{EnvDevice: "mlx5_1", EnvPort: "2", EnvGIDIndex: "3"},
			Options{Device: "rocep1s0f0", Port: 1, GIDIndex: intp(1)}},
		{"largest values", Options{}, map[string]string{EnvPort: "255", EnvGIDIndex: "255"},
			Options{Port: 255, GIDIndex: intp(255)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := applyEnv(tt.opts, lookupOf(tt.env))
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestApplyEnvInvalid(t *testing.T) {
	tests := []struct {
		name, key, value string
	}{
		{"port not a number", EnvPort, "one"},
		{"port zero", EnvPort, "0"},
		{"port too large", EnvPort, "256"},
		{"negative port", EnvPort, "-1"},
		{"GID index not a number", EnvGIDIndex, "auto"},
		{"negative GID index", EnvGIDIndex, "-1"},
		{"GID index too large", EnvGIDIndex, "256"},
		{"device with a slash", EnvDevice, "../mlx5_0"},
		{"device with a space", EnvDevice, "mlx5 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A wrong knob is reported even when the option it feeds is set.
			_, err := applyEnv(Options{Device: "x", Port: 1, GIDIndex: intp(0)}, lookupOf(map[string]string{tt.key: tt.value}))
			require.ErrorIs(t, err, verbs.ErrInvalidArgument)
			var envErr *EnvError
			require.True(t, errors.As(err, &envErr), "error %v is an *EnvError", err)
			require.Equal(t, tt.key, envErr.Var)
			require.Equal(t, tt.value, envErr.Value)
			require.Contains(t, err.Error(), tt.key, "the message names the variable")
			require.Contains(t, err.Error(), tt.value, "the message names the value")
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		ok   bool
	}{
		{"zero", Options{}, true},
		{"port and MTU", Options{Port: 2, PathMTU: 1024}, true},
		{"negative port", Options{Port: -1}, false},
		{"port too large", Options{Port: 256}, false},
		{"negative GID index", Options{GIDIndex: intp(-1)}, false},
		{"GID index too large", Options{GIDIndex: intp(256)}, false},
		{"MTU not a power of two", Options{PathMTU: 1500}, false},
		{"MTU too large", Options{PathMTU: 9000}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.opts
			err := o.validate()
			if tt.ok {
				require.NoError(t, err)
				require.Equal(t, uint8(defaultHopLimit), o.HopLimit, "default hop limit")
				return
			}
			require.ErrorIs(t, err, verbs.ErrInvalidArgument)
		})
	}
}
