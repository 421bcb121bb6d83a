//go:build !ibverbs || !cgo

package ibv

import "github.com/rdmacell/rdmacell/verbs"

// Open returns ErrNotBuilt: this binary was built without the ibverbs
// build tag or without cgo, so it carries no libibverbs code. Programs
// can test for it with errors.Is and use another provider.
func Open(opts Options) (verbs.Device, error) {
	return nil, ErrNotBuilt
}
