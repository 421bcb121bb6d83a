package comm

import (
	"fmt"
	"sync"
)

// Messages in memory that is not registered move through staging buffers
// in chunks of stageChunk bytes: the sender copies a chunk into a buffer
// and sends it from there, the receiver has it written into a buffer and
// copies it out. Each rank has a fixed number of buffers for each
// direction, so a message of any size takes bounded memory.
//
// The two directions have separate pools on purpose. A receive buffer is
// only freed by the peer's send, and if sends had to wait for buffers that
// receives hold, two ranks sending large messages to each other could each
// fill their pool with receives and wait forever for the other's sends.
const (
	stageChunk   = 4 << 20
	stageBuffers = 4
)

// stagePool is one direction's staging buffers. They are allocated on
// first use, so a rank that only moves small or registered messages pays
// nothing.
type stagePool struct {
	mem  *memory
	what string

	mu      sync.Mutex
	reg     *region
	free    []int
	waiters []*peer // peers to wake when a buffer is returned
	err     error
}

// get takes a buffer for p. When none is free it returns ok false and
// wakes p once one is returned; err reports buffers that could not be
// allocated at all.
func (s *stagePool) get(p *peer) (i int, ok bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reg == nil && s.err == nil {
		s.reg, s.err = s.mem.alloc(stageChunk*stageBuffers, false)
		if s.err != nil {
			s.err = fmt.Errorf("comm: allocate %s staging buffers: %w", s.what, s.err)
		}
		for i := stageBuffers - 1; i >= 0; i-- {
			s.free = append(s.free, i)
		}
	}
	if s.err != nil {
		return -1, false, s.err
	}
	if len(s.free) == 0 {
		for _, q := range s.waiters {
			if q == p {
				return -1, false, nil
			}
		}
		s.waiters = append(s.waiters, p)
		return -1, false, nil
	}
	i = s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	return i, true, nil
}

// put returns buffer i and wakes the peers waiting for one.
func (s *stagePool) put(i int) {
	if i < 0 {
		return
	}
	s.mu.Lock()
	s.free = append(s.free, i)
	for _, q := range s.waiters {
		q.wake()
	}
	clear(s.waiters)
	s.waiters = s.waiters[:0]
	s.mu.Unlock()
}

// buf returns buffer i; the region is set once a buffer was handed out.
func (s *stagePool) buf(i int) []byte {
	return s.reg.bytes()[i*stageChunk : (i+1)*stageChunk]
}

func (s *stagePool) addr(i int) uint64 { return s.reg.addr + uint64(i*stageChunk) }
