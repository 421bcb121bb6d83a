package collectives

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/rdmacell/rdmacell/collectives/internal/memp2p"
	"github.com/stretchr/testify/require"
)

// testTimeout bounds every operation of a test, so that a bug is a failure
// rather than a hang. No test asserts on time.
const testTimeout = 60 * time.Second

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// world is n groups over one in-memory world.
type world struct {
	n      int
	mem    *memp2p.World
	groups []*Group
}

func newWorld(t testing.TB, n int, opts Options) *world {
	return newWorldEach(t, n, func(int) Options { return opts })
}

// newWorldEach gives each rank its own options. The ranks share a host
// (and so memory) if rank 0's options force Shared.
func newWorldEach(t testing.TB, n int, opts func(r int) Options) *world {
	return newWorldOn(t, n, opts(0).Algorithm == Shared, opts)
}

// newWorldOn makes a world whose ranks share a host, or do not.
func newWorldOn(t testing.TB, n int, host bool, opts func(r int) Options) *world {
	t.Helper()
	mem := memp2p.New(n)
	if host {
		mem.Host()
	}
	return newWorldMem(t, mem, opts)
}

// newWorldMem makes a world of a group per rank of mem.
func newWorldMem(t testing.TB, mem *memp2p.World, opts func(r int) Options) *world {
	t.Helper()
	n := mem.Size()
	w := &world{n: n, mem: mem}
	for r := range n {
		g, err := New(w.mem.Endpoint(r), opts(r))
		require.NoError(t, err)
		w.groups = append(w.groups, g)
	}
	t.Cleanup(func() {
		for _, g := range w.groups {
			require.NoError(t, g.Close())
		}
		require.Zero(t, w.mem.Allocated(), "scratch memory returned on Close")
	})
	return w
}

// run calls fn on every rank at once and returns the ranks' errors.
func (w *world) run(fn func(r int, g *Group) error) []error {
	errs := make([]error, w.n)
	var wg sync.WaitGroup
	for r, g := range w.groups {
		wg.Go(func() { errs[r] = fn(r, g) })
	}
	wg.Wait()
	return errs
}

// lockstep starts a goroutine per rank that calls fn once each time the
// returned step is called, and makes step wait for every rank and require
// that none failed; step itself allocates nothing, for
// testing.AllocsPerRun. The goroutines end with the test.
func (w *world) lockstep(t *testing.T, fn func(r int, g *Group) error) (step func()) {
	start, done := make([]chan struct{}, w.n), make(chan error, w.n)
	for r := range w.n {
		start[r] = make(chan struct{})
		go func() {
			for range start[r] {
				done <- fn(r, w.groups[r])
			}
		}()
	}
	t.Cleanup(func() {
		for r := range w.n {
			close(start[r])
		}
	})
	return func() {
		for r := range w.n {
			start[r] <- struct{}{}
		}
		for range w.n {
			require.NoError(t, <-done)
		}
	}
}

// ok runs fn on every rank and requires that none failed and that no
// message was left unmatched.
func (w *world) ok(t *testing.T, what string, fn func(r int, g *Group) error) {
	t.Helper()
	for r, err := range w.run(fn) {
		require.NoError(t, err, "%s: rank %d", what, r)
	}
	require.Zero(t, w.mem.Pending(), "%s: unmatched messages", what)
}

// Test data. Values are small integers, powers of two or quarter steps, so
// that every result is exact in every element type, whatever order the
// algorithm combines in: the reference can then be computed serially and
// compared bit for bit.

func isFloat(d dtype) bool {
	return d == dtFloat32 || d == dtFloat64 || d == dtFloat16 || d == dtBFloat16
}

// genValue is element i of rank r's input for op.
func genValue(r, i int, op Op) float64 {
	switch op {
	case Prod:
		// At most a quarter of the ranks contribute 2 and a quarter 1/2
		// to an element, so partial products stay within 2^±8.
		v := 1.0
		switch (r + i) % 4 {
		case 0:
			v = 2
		case 2:
			v = 0.5
		}
		if (3*r+i)%5 == 0 {
			v = -v
		}
		return v
	case Min, Max:
		return float64((37*r+11*i)%101-50) / 4
	}
	return float64((7*r+13*i)%9 - 4)
}

func fromF64[T Element](v float64) T {
	var t T
	switch p := any(&t).(type) {
	case *float32:
		*p = float32(v)
	case *float64:
		*p = v
	case *Float16:
		*p = ToFloat16(float32(v))
	case *BFloat16:
		*p = ToBFloat16(float32(v))
	case *int32:
		*p = int32(v)
	case *int64:
		*p = int64(v)
	case *uint8:
		*p = uint8(int64(v))
	}
	return t
}

func toF64[T Element](x T) float64 {
	switch p := any(x).(type) {
	case float32:
		return float64(p)
	case float64:
		return p
	case Float16:
		return float64(p.Float32())
	case BFloat16:
		return float64(p.Float32())
	}
	panic("not a float")
}

// genVec is rank r's input of count elements; integer ops get values
// that differ from the float ones (prod: 1, 2, 3 and -1).
func genVec[T Element](r, count int, op Op) []T {
	v := make([]T, count)
	intData := !isFloat(dtypeOf[T]())
	for i := range v {
		x := genValue(r, i, op)
		if intData && op == Prod {
			x = float64((r+2*i)%4) - 1
			if x == 0 {
				x = 3
			}
		}
		v[i] = fromF64[T](x)
	}
	return v
}

// reference reduces inputs serially, rank 0 first.
func reference[T Element](inputs [][]T, op Op) []T {
	n := len(inputs)
	out := make([]T, len(inputs[0]))
	if isFloat(dtypeOf[T]()) {
		for i := range out {
			acc := toF64(inputs[0][i])
			for r := 1; r < n; r++ {
				x := toF64(inputs[r][i])
				switch op {
				case Sum, Avg:
					acc += x
				case Prod:
					acc *= x
				case Min:
					acc = math.Min(acc, x)
				case Max:
					acc = math.Max(acc, x)
				}
			}
			if op == Avg {
				acc /= float64(n)
			}
			out[i] = fromF64[T](acc)
		}
		return out
	}
	for i := range out {
		acc := inputs[0][i]
		for r := 1; r < n; r++ {
			x := inputs[r][i]
			switch op {
			case Sum, Avg:
				acc += x
			case Prod:
				acc *= x
			case Min:
				acc = min(acc, x)
			case Max:
				acc = max(acc, x)
			}
		}
		if op == Avg {
			acc /= T(n)
		}
		out[i] = acc
	}
	return out
}

var allOps = []Op{Sum, Prod, Min, Max, Avg}

// counts to test for n ranks: empty, one, a prime, fewer than the ranks,
// and a few hundred (enough for several chunks of the small test chunk).
func testCounts(n int) []int {
	cs := []int{0, 1, 13, 203}
	if n > 2 {
		cs = append(cs, n-1)
	}
	return cs
}

func caseName(parts ...any) string { return fmt.Sprint(parts...) }
