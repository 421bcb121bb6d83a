package collectives

import (
	"fmt"
	"unsafe"
)

// AllocSlice returns n elements of memory registered with the group's
// transport (comm.Comm.Alloc, off the Go heap): the collectives and
// messages on it move without a copy. It stays valid until FreeSlice or
// until the communicator closes; the slice must not be used after either,
// nor grown with append, which would copy it to the heap.
func AllocSlice[T Element](g *Group, n int) ([]T, error) {
	if n < 0 {
		return nil, &ArgError{Rank: g.rank, Op: "AllocSlice", Arg: "n", Problem: fmt.Sprintf("%d is negative", n)}
	}
	if n == 0 {
		return []T{}, nil
	}
	var zero T
	size := int(unsafe.Sizeof(zero))
	b, err := g.p.Alloc(n * size)
	if err != nil {
		return nil, fmt.Errorf("collectives: rank %d: AllocSlice of %d elements: %w", g.rank, n, err)
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	if uintptr(p)%uintptr(unsafe.Alignof(zero)) != 0 {
		_ = g.p.Free(b)
		return nil, fmt.Errorf("collectives: rank %d: AllocSlice: the transport's memory at %p is not aligned for %T", g.rank, p, zero)
	}
	return unsafe.Slice((*T)(p), n), nil
}

// FreeSlice releases s, which AllocSlice returned. No operation may be
// using it.
func FreeSlice[T Element](g *Group, s []T) error {
	if len(s) == 0 {
		return nil
	}
	return g.p.Free(asBytes(s))
}

// Register makes s, memory the program already holds (a slice of the Go
// heap, a framework's tensor, memory of C), registered memory of the
// group's communicator, so that collectives and messages on it move
// without a staging copy over tcp and RDMA NICs, as on memory of
// AllocSlice (see comm.Comm.Register, which is what it calls; over shared
// memory the bytes are copied as before). s stays the caller's: until
// Unregister or the group's communicator closes, it must not be freed by
// its owner nor grown with append, and registered slices must not
// overlap.
func Register[T Element](g *Group, s []T) error {
	c, err := g.communicator("Register")
	if err != nil {
		return err
	}
	return c.Register(asBytes(s))
}

// Unregister ends Register of s, which must be the slice registered, whole.
// No operation may be using it.
func Unregister[T Element](g *Group, s []T) error {
	c, err := g.communicator("Unregister")
	if err != nil {
		return err
	}
	return c.Unregister(asBytes(s))
}
