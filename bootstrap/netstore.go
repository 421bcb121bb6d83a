package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// Pacing of DialStore's attempts: the serving rank may start after the
// others, so a refused connection is tried again until the caller's
// context ends.
const (
	storeDialAttempt  = 2 * time.Second
	storeRetryInitial = 50 * time.Millisecond
	storeRetryMax     = time.Second
)

// netStore is a Store served by another process (StoreServer), reached
// over one authenticated TCP connection.
type netStore struct {
	addr string
	nc   net.Conn
	fr   *framer
	wmu  sync.Mutex // serialises frames written

	done   chan struct{} // closed when the connection ended
	reader sync.WaitGroup

	mu      sync.Mutex
	lastID  uint64
	pending map[uint64]chan frame
	watches map[uint64]*clientWatch
	ttls    map[LeaseID]time.Duration
	lost    error // why the connection ended
}

// DialStore connects to the store a rank of the job serves at addr
// (host:port, see ServeStore), proving secret. A refused or unreachable
// address is tried again until ctx ends, since the serving rank may not be
// listening yet; an error then wraps ErrUnreachable. A server that does
// not prove the same secret, or refuses this one, is an error wrapping
// ErrStoreAuth at once. The connection is not re-established once lost:
// the rank's lease then ends on the server, as a dead rank's does.
func DialStore(ctx context.Context, addr string, secret []byte) (Store, error) {
	if len(secret) < SecretSize {
		return nil, fmt.Errorf("bootstrap: store at %s: secret of %d bytes, want at least %d", addr, len(secret), SecretSize)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("bootstrap: store address %q: want host:port: %w", addr, err)
	}
	key, err := storeAuthKey(secret)
	if err != nil {
		return nil, err
	}
	delay := storeRetryInitial
	for attempt := 1; ; attempt++ {
		s, err := dialStoreOnce(ctx, addr, key)
		if err == nil {
			return s, nil
		}
		if errors.Is(err, ErrStoreAuth) {
			return nil, fmt.Errorf("bootstrap: store at %s: %w", addr, err)
		}
		select {
		case <-time.After(delay):
			delay = min(2*delay, storeRetryMax)
		case <-ctx.Done():
			return nil, &unreachableError{addr: addr, attempts: attempt, last: err, why: ctx.Err()}
		}
	}
}

func dialStoreOnce(ctx context.Context, addr string, key []byte) (*netStore, error) {
	actx, cancel := context.WithTimeout(ctx, storeDialAttempt)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(actx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	deadline, _ := actx.Deadline()
	_ = nc.SetDeadline(deadline)
	fr, err := clientHandshake(nc, key)
	if err != nil {
		_ = nc.Close()
		return nil, err
	}
	_ = nc.SetDeadline(time.Time{})
	s := &netStore{
		addr:    addr,
		nc:      nc,
		fr:      fr,
		done:    make(chan struct{}),
		pending: make(map[uint64]chan frame),
		watches: make(map[uint64]*clientWatch),
		ttls:    make(map[LeaseID]time.Duration),
	}
	s.reader.Add(1)
	go s.read()
	return s, nil
}

func (s *netStore) Describe() string { return "the store served at " + s.addr }

func (s *netStore) Close() error {
	s.fail(errors.New("store client closed"))
	s.reader.Wait()
	return nil
}

// fail ends the connection, once, for the reason err.
func (s *netStore) fail(err error) {
	s.mu.Lock()
	if s.lost == nil {
		s.lost = err
		close(s.done)
	}
	s.mu.Unlock()
	_ = s.nc.Close()
}

// lostErr is the error of an operation after the connection ended.
func (s *netStore) lostErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Errorf("bootstrap: %s: connection lost: %w", s.Describe(), s.lost)
}

// read dispatches the server's frames until the connection ends.
func (s *netStore) read() {
	defer s.reader.Done()
	for {
		f, err := s.fr.readFrame()
		if err != nil {
			s.fail(err)
			s.mu.Lock()
			watches := s.watches
			s.watches = map[uint64]*clientWatch{}
			s.mu.Unlock()
			for _, w := range watches {
				w.push(WatchResponse{Err: s.lostErr()}, true)
			}
			return
		}
		s.mu.Lock()
		ch, isReq := s.pending[f.id]
		delete(s.pending, f.id)
		w := s.watches[f.id]
		if f.typ == respEnd || f.typ == respWatch && f.flag {
			delete(s.watches, f.id)
		}
		s.mu.Unlock()
		switch {
		case isReq && f.typ != respWatch && f.typ != respEnd:
			ch <- f // buffered for one
		case w != nil && f.typ == respWatch:
			w.push(WatchResponse{Events: f.events, Compacted: f.flag}, f.flag)
		case w != nil && f.typ == respEnd:
			var wr WatchResponse
			if f.text != "" {
				wr.Err = fmt.Errorf("bootstrap: %s: watch ended: %s", s.Describe(), f.text)
			}
			w.push(wr, true)
		case isReq, w != nil:
			s.fail(fmt.Errorf("%w: frame type %d answers frame %d", errMalformed, f.typ, f.id))
		default:
			// The answer of a request whose caller gave up, or the last
			// frames of a watch it ended.
		}
	}
}

// request sends f and waits for its answer, until ctx ends.
func (s *netStore) request(ctx context.Context, f *frame) (frame, error) {
	if err := ctx.Err(); err != nil {
		return frame{}, err
	}
	ch := make(chan frame, 1)
	s.mu.Lock()
	if s.lost != nil {
		s.mu.Unlock()
		return frame{}, s.lostErr()
	}
	s.lastID++
	f.id = s.lastID
	s.pending[f.id] = ch
	s.mu.Unlock()
	forget := func() {
		s.mu.Lock()
		delete(s.pending, f.id)
		s.mu.Unlock()
	}
	if err := s.write(ctx, f); err != nil {
		forget()
		return frame{}, err
	}
	select {
	case r := <-ch:
		if r.typ == respError {
			return frame{}, s.remoteErr(r)
		}
		return r, nil
	case <-s.done:
		forget()
		return frame{}, s.lostErr()
	case <-ctx.Done():
		forget()
		return frame{}, ctx.Err()
	}
}

// write sends f, no later than ctx allows nor storeWriteTimeout.
func (s *netStore) write(ctx context.Context, f *frame) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	deadline := time.Now().Add(storeWriteTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = s.nc.SetWriteDeadline(deadline)
	if err := s.fr.writeFrame(f); err != nil {
		// A frame cut short leaves the stream unusable.
		s.fail(err)
		return s.lostErr()
	}
	return nil
}

// remoteErr is the error an error frame reports.
func (s *netStore) remoteErr(r frame) error {
	switch r.code {
	case codeNoLease:
		return fmt.Errorf("bootstrap: %s: %w", s.Describe(), errLeaseNotFound)
	case codeClosed:
		return fmt.Errorf("bootstrap: %s: %w", s.Describe(), errLocalClosed)
	}
	return fmt.Errorf("bootstrap: %s: %s", s.Describe(), r.text)
}

func (s *netStore) Grant(ctx context.Context, ttl time.Duration) (LeaseID, time.Duration, error) {
	if ttl <= 0 || ttl > maxStoreTTL {
		return NoLease, 0, fmt.Errorf("bootstrap: lease TTL %v, want 0 < TTL <= %v", ttl, maxStoreTTL)
	}
	r, err := s.request(ctx, &frame{typ: reqGrant, num: int64(ttl)})
	if err != nil {
		return NoLease, 0, err
	}
	s.mu.Lock()
	s.ttls[r.lease] = time.Duration(r.num)
	s.mu.Unlock()
	return r.lease, time.Duration(r.num), nil
}

// KeepAlive renews at a third of the TTL, as etcd's client does, and
// gives up once the server says the lease is gone, the connection is
// lost, or no renewal succeeded for a whole TTL.
func (s *netStore) KeepAlive(ctx context.Context, lease LeaseID) (<-chan struct{}, error) {
	s.mu.Lock()
	ttl, ok := s.ttls[lease]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("bootstrap: %s: lease %d was not granted through this connection: %w", s.Describe(), lease, errLeaseNotFound)
	}
	out := make(chan struct{}, 1)
	go func() {
		defer close(out)
		tick := time.NewTicker(ttl / 3)
		defer tick.Stop()
		last := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.done:
				return
			case <-tick.C:
			}
			rctx, cancel := context.WithTimeout(ctx, ttl/3)
			_, err := s.request(rctx, &frame{typ: reqKeepAlive, lease: lease})
			cancel()
			switch {
			case err == nil:
				last = time.Now()
				select {
				case out <- struct{}{}:
				default:
				}
			case errors.Is(err, errLeaseNotFound), time.Since(last) > ttl:
				return
			}
		}
	}()
	return out, nil
}

func (s *netStore) Revoke(ctx context.Context, lease LeaseID) error {
	_, err := s.request(ctx, &frame{typ: reqRevoke, lease: lease})
	if err == nil {
		s.mu.Lock()
		delete(s.ttls, lease)
		s.mu.Unlock()
	}
	return err
}

// checkKV refuses, before anything is sent, what the server would refuse.
func checkKV(key string, value []byte) error {
	if len(key) > maxStoreKey {
		return fmt.Errorf("bootstrap: key of %d bytes, want at most %d", len(key), maxStoreKey)
	}
	if len(value) > maxStoreValue {
		return fmt.Errorf("bootstrap: value of key %q is %d bytes, want at most %d", key, len(value), maxStoreValue)
	}
	return nil
}

func (s *netStore) Put(ctx context.Context, key string, value []byte, lease LeaseID) error {
	if err := checkKV(key, value); err != nil {
		return err
	}
	_, err := s.request(ctx, &frame{typ: reqPut, key: key, value: value, lease: lease})
	return err
}

func (s *netStore) Create(ctx context.Context, key string, value []byte, lease LeaseID) (bool, []byte, error) {
	if err := checkKV(key, value); err != nil {
		return false, nil, err
	}
	r, err := s.request(ctx, &frame{typ: reqCreate, key: key, value: value, lease: lease})
	if err != nil {
		return false, nil, err
	}
	if r.flag {
		return true, nil, nil
	}
	return false, r.value, nil
}

func (s *netStore) Delete(ctx context.Context, key string, prefix bool) error {
	if err := checkKV(key, nil); err != nil {
		return err
	}
	_, err := s.request(ctx, &frame{typ: reqDelete, key: key, flag: prefix})
	return err
}

func (s *netStore) List(ctx context.Context, prefix string) ([]KeyValue, int64, error) {
	if err := checkKV(prefix, nil); err != nil {
		return nil, 0, err
	}
	r, err := s.request(ctx, &frame{typ: reqList, key: prefix})
	if err != nil {
		return nil, 0, err
	}
	return r.kvs, r.num, nil
}

func (s *netStore) Watch(ctx context.Context, prefix string, rev int64) <-chan WatchResponse {
	out := make(chan WatchResponse)
	w := &clientWatch{signal: make(chan struct{}, 1)}
	s.mu.Lock()
	lost := s.lost
	s.lastID++
	id := s.lastID
	if lost == nil {
		s.watches[id] = w
	}
	s.mu.Unlock()
	if err := checkKV(prefix, nil); err != nil {
		w.push(WatchResponse{Err: err}, true)
	} else if lost != nil {
		w.push(WatchResponse{Err: s.lostErr()}, true)
	} else if err := s.write(ctx, &frame{typ: reqWatch, id: id, key: prefix, num: rev}); err != nil {
		w.push(WatchResponse{Err: err}, true)
	}
	go func() {
		defer close(out)
		for {
			wr, ok, last := w.pop()
			if ok {
				select {
				case out <- wr:
				case <-ctx.Done():
				}
			}
			if last || ctx.Err() != nil {
				break
			}
			if !ok {
				select {
				case <-w.signal:
				case <-ctx.Done():
				}
			}
		}
		s.mu.Lock()
		_, open := s.watches[id]
		delete(s.watches, id)
		s.mu.Unlock()
		if open {
			// Tell the server; its last frames are dropped on arrival.
			wctx, cancel := context.WithTimeout(context.Background(), storeWriteTimeout)
			_ = s.write(wctx, &frame{typ: reqUnwatch, id: id})
			cancel()
		}
	}()
	return out
}

// clientWatch queues a watch's responses between the connection's reader,
// which must never wait for a slow consumer (the lease renewals share the
// connection), and the consumer.
type clientWatch struct {
	mu     sync.Mutex
	queue  []WatchResponse
	ended  bool
	signal chan struct{}
}

// push queues wr; last says nothing follows it.
func (w *clientWatch) push(wr WatchResponse, last bool) {
	w.mu.Lock()
	if !w.ended {
		if len(wr.Events) > 0 || wr.Compacted || wr.Err != nil {
			w.queue = append(w.queue, wr)
		}
		w.ended = last
	}
	w.mu.Unlock()
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

// pop takes the next response; last says the watch is over once it is
// delivered.
func (w *clientWatch) pop() (wr WatchResponse, ok, last bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queue) > 0 {
		wr, w.queue = w.queue[0], w.queue[1:]
		return wr, true, w.ended && len(w.queue) == 0
	}
	return WatchResponse{}, false, w.ended
}

// unreachableError reports a served store that did not answer before the
// caller's context ended. It matches ErrUnreachable, and unwraps to the
// last attempt's error and the context's.
type unreachableError struct {
	addr      string
	attempts  int
	last, why error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("bootstrap: store at %s unreachable after %d attempts (last: %v): %v", e.addr, e.attempts, e.last, e.why)
}

func (e *unreachableError) Is(target error) bool { return target == ErrUnreachable }

func (e *unreachableError) Unwrap() []error { return []error{e.last, e.why} }
