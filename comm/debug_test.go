package comm

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
)

// Debug records pass for the components selected, and only for them;
// other levels pass whatever the setting.
func TestDebugComponents(t *testing.T) {
	for _, tc := range []struct {
		setting  string
		comm, tc bool // whether the comm and tcp debug records show
	}{
		{"", false, false},
		{"0", false, false},
		{"1", true, true},
		{"all", true, true},
		{"comm", true, false},
		{"cell,tcp", false, true},
		{"launcher", false, false},
	} {
		var out bytes.Buffer
		base := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
		if tc.setting == "" || tc.setting == "0" {
			base = slog.New(slog.NewTextHandler(&out, nil)) // the default level
		}
		log := newLogger(base, tc.setting)
		log.With("component", "comm").Debug("comm-debug")
		log.With("component", "tcp").Debug("tcp-debug")
		log.Debug("bare-debug", "component", "comm")
		log.With("component", "tcp").Warn("tcp-warn")
		s := out.String()
		require.Equal(t, tc.comm, bytes.Contains(out.Bytes(), []byte("comm-debug")), "%q: %s", tc.setting, s)
		require.Equal(t, tc.comm, bytes.Contains(out.Bytes(), []byte("bare-debug")), "%q: %s", tc.setting, s)
		require.Equal(t, tc.tc, bytes.Contains(out.Bytes(), []byte("tcp-debug")), "%q: %s", tc.setting, s)
		require.Contains(t, s, "tcp-warn", "%q", tc.setting)
	}
	_, err := parseDebug("Comm")
	require.ErrorIs(t, err, ErrInvalidArgument)
}
