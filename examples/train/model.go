package main

import (
	"math"
	"math/rand/v2"

	"github.com/rdmacell/rdmacell/collectives/exact"
)

// layer is a fully connected layer y = W·x + b. Its weights and its
// gradients are views into the model's flat parameter and gradient
// vectors, so that a range of layers is one contiguous slice: that is
// what lets gradients be averaged in buckets without copying.
type layer struct {
	in, out int
	w, b    []float32 // weights (out rows of in) and biases
	gw, gb  []float32 // their gradients
	relu    bool      // every layer but the last is followed by a ReLU
	// With --exact, the exact sums the gradients are rounded from (see
	// exactGrads); backward adds to them instead of to gw and gb.
	aw, ab []exact.Acc

	// Per batch: the layer's input and its output before the ReLU.
	x, z []float32
}

// mlp is a multi-layer perceptron trained with softmax cross-entropy.
type mlp struct {
	layers []*layer
	params []float32 // every layer's w then b, in forward order
	grads  []float32 // the same layout as params
}

// newMLP builds an MLP of the given widths (input first, classes last)
// with He-initialised weights drawn from seed.
func newMLP(seed uint64, widths ...int) *mlp {
	n := 0
	for i := 1; i < len(widths); i++ {
		n += widths[i]*widths[i-1] + widths[i]
	}
	m := &mlp{params: make([]float32, n), grads: make([]float32, n)}
	rng := rand.New(rand.NewPCG(seed, 0))
	at := 0
	for i := 1; i < len(widths); i++ {
		in, out := widths[i-1], widths[i]
		l := &layer{in: in, out: out, relu: i < len(widths)-1}
		l.w, l.gw = m.params[at:at+in*out], m.grads[at:at+in*out]
		at += in * out
		l.b, l.gb = m.params[at:at+out], m.grads[at:at+out]
		at += out
		scale := math.Sqrt(2 / float64(in))
		for j := range l.w {
			l.w[j] = float32(rng.NormFloat64() * scale)
		}
		m.layers = append(m.layers, l)
	}
	return m
}

// forward computes the layer's output for a batch of rows of l.in values.
func (l *layer) forward(x []float32, rows int) []float32 {
	l.x = x
	l.z = grow(l.z, rows*l.out)
	y := make([]float32, rows*l.out)
	for r := range rows {
		xr := x[r*l.in : (r+1)*l.in]
		for o := range l.out {
			s := l.b[o]
			for i, w := range l.w[o*l.in : (o+1)*l.in] {
				s += w * xr[i]
			}
			l.z[r*l.out+o] = s
			if l.relu {
				s = max(s, 0)
			}
			y[r*l.out+o] = s
		}
	}
	return y
}

// backward takes the gradient of the loss with respect to the layer's
// output, fills in the layer's weight and bias gradients, and returns the
// gradient with respect to its input.
func (l *layer) backward(dy []float32, rows int) []float32 {
	clear(l.gw)
	clear(l.gb)
	dx := make([]float32, rows*l.in)
	for r := range rows {
		xr, dxr := l.x[r*l.in:(r+1)*l.in], dx[r*l.in:(r+1)*l.in]
		for o := range l.out {
			d := dy[r*l.out+o]
			if l.relu && l.z[r*l.out+o] <= 0 {
				continue
			}
			w := l.w[o*l.in : (o+1)*l.in]
			if l.aw != nil {
				l.ab[o].AddFloat32(d)
				acc := l.aw[o*l.in : (o+1)*l.in]
				for i := range l.in {
					acc[i].AddFloat32(d * xr[i])
					dxr[i] += d * w[i]
				}
				continue
			}
			l.gb[o] += d
			gw := l.gw[o*l.in : (o+1)*l.in]
			for i := range l.in {
				gw[i] += d * xr[i]
				dxr[i] += d * w[i]
			}
		}
	}
	return dx
}

// lossAndGrad runs the batch forward and returns its mean cross-entropy
// loss and the gradient with respect to the logits of the loss summed
// over the batch and divided by norm: the batch's mean loss when norm is
// the batch size, the batch's share of the global batch's mean when norm
// is the global batch size.
func (m *mlp) lossAndGrad(x []float32, y []int, norm int) (float64, []float32) {
	rows := len(y)
	logits := x
	for _, l := range m.layers {
		logits = l.forward(logits, rows)
	}
	classes := m.layers[len(m.layers)-1].out
	dlogits := make([]float32, len(logits))
	loss := 0.0
	for r := range rows {
		z, dz := logits[r*classes:(r+1)*classes], dlogits[r*classes:(r+1)*classes]
		// Subtract the largest logit so that exp cannot overflow.
		top := z[0]
		for _, v := range z {
			top = max(top, v)
		}
		sum := 0.0
		for c, v := range z {
			e := math.Exp(float64(v - top))
			dz[c] = float32(e)
			sum += e
		}
		for c := range dz {
			dz[c] = float32(float64(dz[c]) / sum / float64(norm))
		}
		dz[y[r]] -= 1 / float32(norm)
		loss += math.Log(sum) - float64(z[y[r]]-top)
	}
	return loss / float64(rows), dlogits
}

// step applies plain SGD to every parameter.
func (m *mlp) step(lr float32) {
	for i, g := range m.grads {
		m.params[i] -= lr * g
	}
}

// grow returns s with length n, reusing its memory when it is big enough.
func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}
