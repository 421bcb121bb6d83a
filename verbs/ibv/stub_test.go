//go:build !ibverbs || !cgo

package ibv

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOpenWithoutTag(t *testing.T) {
	d, err := Open(Options{})
	require.ErrorIs(t, err, ErrNotBuilt)
	require.Nil(t, d)
	require.Contains(t, err.Error(), "built without the ibverbs tag")
}
