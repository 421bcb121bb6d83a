package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sampleCheckpoint() *checkpoint {
	return &checkpoint{fingerprint: 0xfeedface, epoch: 3, step: 7,
		totals: []float64{1.5, -2.25}, params: []float32{0.5, -1, 3.25, 0}}
}

// TestCheckpointRoundTrip saves and loads a checkpoint: the same state
// comes back, and the temporary file is gone.
func TestCheckpointRoundTrip(t *testing.T) {
	dir := t.TempDir()
	c := sampleCheckpoint()
	require.NoError(t, c.save(dir))
	got, err := loadCheckpoint(dir, c.fingerprint, 2, 4)
	require.NoError(t, err)
	assert.Equal(t, c, got)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Equal(t, checkpointName, entries[0].Name())

	none, err := loadCheckpoint(t.TempDir(), c.fingerprint, 2, 4)
	require.NoError(t, err)
	assert.Nil(t, none, "no checkpoint yet")
}

// TestCheckpointRefused: a checkpoint of other settings, another world or
// model, or a damaged file is an error naming the file, never a silent
// fresh start.
func TestCheckpointRefused(t *testing.T) {
	dir := t.TempDir()
	c := sampleCheckpoint()
	require.NoError(t, c.save(dir))
	for _, tt := range []struct {
		name          string
		fp            uint64
		ranks, params int
		want          string
	}{
		{"other settings", 1, 2, 4, "a run with other settings"},
		{"other world", c.fingerprint, 3, 4, "holds 2 ranks and 4 parameters, want 3 and 4"},
		{"other model", c.fingerprint, 2, 5, "want 2 and 5"},
	} {
		_, err := loadCheckpoint(dir, tt.fp, tt.ranks, tt.params)
		require.ErrorContains(t, err, tt.want, tt.name)
		assert.ErrorContains(t, err, filepath.Join(dir, checkpointName), tt.name)
	}

	b := c.encode()
	for i := range b {
		damaged := append([]byte(nil), b...)
		damaged[i] ^= 0x10
		_, err := decodeCheckpoint(damaged)
		assert.ErrorIs(t, err, errCorrupt, "byte %d flipped", i)
	}
	for n := range len(b) {
		_, err := decodeCheckpoint(b[:n])
		assert.ErrorIs(t, err, errCorrupt, "cut to %d bytes", n)
	}
}

// FuzzDecodeCheckpoint: whatever the file holds, decoding returns a
// checkpoint that encodes back to the same bytes, or an error; it never
// panics.
func FuzzDecodeCheckpoint(f *testing.F) {
	f.Add(sampleCheckpoint().encode())
	f.Add([]byte("RCTRAIN"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeCheckpoint(b)
		if err != nil {
			return
		}
		assert.Equal(t, b, c.encode())
	})
}
