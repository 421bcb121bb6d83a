package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"
)

// maxStoreConns bounds the connections a served store holds at once,
// authenticated or not: a flood of connections cannot exhaust the
// process's descriptors. A job has one connection per rank but the serving
// one.
const maxStoreConns = 8192

// acceptRetryDelay spaces out accepts after one failed.
const acceptRetryDelay = 100 * time.Millisecond

// storeWriteTimeout bounds one write to a client: a client that stops
// reading is cut off rather than allowed to stall the server.
const storeWriteTimeout = 10 * time.Second

// StoreServer serves a store to the other processes of a job over TCP
// (see DialStore), so that a job started by a scheduler (srun, mpirun, a
// Kubernetes Job) needs no server of its own: one rank serves, inside its
// own process, the store the others connect to. Every connection must
// prove the job secret first (see netwire.go); the state is that of
// [NewLocalStore], leases included, so a client that stops renewing loses
// its lease after its TTL, whatever its connection does.
type StoreServer struct {
	local *localStore
	ln    net.Listener
	key   []byte
	log   *slog.Logger

	slots chan struct{} // one per open connection
	wg    sync.WaitGroup

	mu     sync.Mutex
	conns  map[*serverConn]bool
	closed bool
}

// ServeStore serves a new store on ln to the clients that prove secret.
// It takes ln over: Close closes it. Logger receives the refused
// connections, at debug level; nil means slog.Default().
func ServeStore(ln net.Listener, secret []byte, logger *slog.Logger) (*StoreServer, error) {
	if len(secret) < SecretSize {
		return nil, fmt.Errorf("bootstrap: serve store on %s: secret of %d bytes, want at least %d", ln.Addr(), len(secret), SecretSize)
	}
	key, err := storeAuthKey(secret)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: serve store on %s: %w", ln.Addr(), err)
	}
	if logger == nil {
		logger = slog.Default()
	}
	s := &StoreServer{
		local: NewLocalStore().(*localStore),
		ln:    ln,
		key:   key,
		log:   logger.With("component", "bootstrap", "store", ln.Addr().String()),
		slots: make(chan struct{}, maxStoreConns),
		conns: make(map[*serverConn]bool),
	}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Addr is the address the server listens on.
func (s *StoreServer) Addr() net.Addr { return s.ln.Addr() }

// Store is the served store itself, for the process that serves it: no
// connection, no authentication. It stays usable until Close.
func (s *StoreServer) Store() Store { return s.local }

// Clients is the number of authenticated clients connected now.
func (s *StoreServer) Clients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for c := range s.conns {
		if c.authed {
			n++
		}
	}
	return n
}

// Close stops accepting, waits until no other process is still in the
// store (every client hung up, or let its lease end) or ctx ends, then
// cuts off the clients left and ends the store. The serving rank calls it
// last, so that the ranks still leaving can say so in the store.
func (s *StoreServer) Close(ctx context.Context) error {
	_ = s.ln.Close()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !s.deserted() && ctx.Err() == nil {
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		_ = c.nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return s.local.Close()
}

// deserted reports whether no client is connected, or none holds a lease.
func (s *StoreServer) deserted() bool {
	if s.Clients() == 0 {
		return true
	}
	s.local.mu.Lock()
	defer s.local.mu.Unlock()
	return len(s.local.leases) == 0
}

func (s *StoreServer) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			// Out of descriptors, say: the clients that hang up make room.
			s.log.Warn("store: accept failed", "err", err)
			time.Sleep(acceptRetryDelay)
			continue
		}
		select {
		case s.slots <- struct{}{}:
		default:
			s.log.Debug("store: connection refused: too many connections", "from", nc.RemoteAddr(), "limit", maxStoreConns)
			_ = nc.Close()
			continue
		}
		c := &serverConn{srv: s, nc: nc, watches: make(map[uint64]context.CancelFunc)}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = nc.Close()
			<-s.slots
			return
		}
		s.conns[c] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go c.serve()
	}
}

// drop forgets a connection that ended.
func (s *StoreServer) drop(c *serverConn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	<-s.slots
}

// serverConn is one client's connection.
type serverConn struct {
	srv    *StoreServer
	nc     net.Conn
	authed bool // under srv.mu

	wmu sync.Mutex // serialises frames written
	fr  *framer

	wmuWatches sync.Mutex
	watches    map[uint64]context.CancelFunc
}

func (c *serverConn) serve() {
	s := c.srv
	defer s.wg.Done()
	defer s.drop(c)
	defer c.nc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var watchers sync.WaitGroup
	defer watchers.Wait()
	defer cancel()

	_ = c.nc.SetDeadline(time.Now().Add(storeHandshake))
	fr, err := serverHandshake(c.nc, s.key)
	if err != nil {
		s.log.Debug("store: connection refused", "from", c.nc.RemoteAddr(), "err", err)
		return
	}
	_ = c.nc.SetDeadline(time.Time{})
	c.fr = fr
	s.mu.Lock()
	c.authed = true
	s.mu.Unlock()

	for {
		f, err := fr.readFrame()
		if err != nil {
			if errors.Is(err, errMalformed) {
				s.log.Warn("store: closing a client's connection", "from", c.nc.RemoteAddr(), "err", err)
			}
			return
		}
		if f.typ == reqWatch {
			wctx, stop := context.WithCancel(ctx)
			c.wmuWatches.Lock()
			if _, dup := c.watches[f.id]; dup {
				c.wmuWatches.Unlock()
				stop()
				s.log.Warn("store: closing a client's connection", "from", c.nc.RemoteAddr(), "err",
					fmt.Errorf("%w: watch id %d already in use", errMalformed, f.id))
				return
			}
			c.watches[f.id] = stop
			c.wmuWatches.Unlock()
			watchers.Add(1)
			go func() {
				defer watchers.Done()
				c.forward(wctx, f)
			}()
			continue
		}
		if f.typ == reqUnwatch {
			c.wmuWatches.Lock()
			stop := c.watches[f.id]
			c.wmuWatches.Unlock()
			if stop != nil {
				stop()
			}
			continue
		}
		if err := c.write(c.handle(ctx, f)); err != nil {
			return
		}
	}
}

// handle runs one request on the store and returns its response.
func (c *serverConn) handle(ctx context.Context, f frame) *frame {
	st := c.srv.local
	resp := &frame{typ: respOK, id: f.id}
	var err error
	switch f.typ {
	case reqGrant:
		var lease LeaseID
		var ttl time.Duration
		lease, ttl, err = st.Grant(ctx, time.Duration(f.num))
		resp.typ, resp.lease, resp.num = respGrant, lease, int64(ttl)
	case reqKeepAlive:
		if !st.renew(f.lease) {
			err = errLeaseNotFound
		}
	case reqRevoke:
		err = st.Revoke(ctx, f.lease)
	case reqPut:
		err = st.Put(ctx, f.key, f.value, f.lease)
	case reqCreate:
		resp.typ = respCreate
		resp.flag, resp.value, err = st.Create(ctx, f.key, f.value, f.lease)
	case reqDelete:
		err = st.Delete(ctx, f.key, f.flag)
	case reqList:
		resp.typ = respList
		resp.kvs, resp.num, err = st.List(ctx, f.key)
		if err == nil && listSize(resp.kvs) > maxFrame-1024 {
			err = fmt.Errorf("bootstrap: listing of %q is over the %d-byte frame bound", f.key, maxFrame)
		}
	}
	if err != nil {
		code := codeOther
		switch {
		case errors.Is(err, errLeaseNotFound):
			code = codeNoLease
		case errors.Is(err, errLocalClosed):
			code = codeClosed
		}
		return &frame{typ: respError, id: f.id, code: code, text: truncate(err.Error(), maxStoreText)}
	}
	return resp
}

// forward sends a watch's responses to the client until the watch ends.
func (c *serverConn) forward(ctx context.Context, f frame) {
	defer func() {
		c.wmuWatches.Lock()
		delete(c.watches, f.id)
		c.wmuWatches.Unlock()
	}()
	for wr := range c.srv.local.Watch(ctx, f.key, f.num) {
		if wr.Err != nil {
			_ = c.write(&frame{typ: respEnd, id: f.id, text: truncate(wr.Err.Error(), maxStoreText)})
			return
		}
		// A batch too large for one frame goes in several, in order.
		for evs := wr.Events; len(evs) > 0 || wr.Compacted; {
			n, size := 0, 0
			for n < len(evs) && (n == 0 || size+eventSize(evs[n]) < maxFrame-1024) {
				size += eventSize(evs[n])
				n++
			}
			if err := c.write(&frame{typ: respWatch, id: f.id, flag: wr.Compacted, events: evs[:n]}); err != nil {
				return
			}
			if wr.Compacted {
				return // the watch is over; the client lists again
			}
			evs = evs[n:]
		}
	}
	_ = c.write(&frame{typ: respEnd, id: f.id})
}

// write sends one frame, bounded by storeWriteTimeout.
func (c *serverConn) write(f *frame) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.nc.SetWriteDeadline(time.Now().Add(storeWriteTimeout))
	err := c.fr.writeFrame(f)
	if err != nil {
		_ = c.nc.Close() // the reader ends too
	}
	return err
}

func listSize(kvs []KeyValue) int {
	n := 0
	for _, kv := range kvs {
		n += 16 + len(kv.Key) + len(kv.Value)
	}
	return n
}

func eventSize(ev Event) int { return 17 + len(ev.KV.Key) + len(ev.KV.Value) }

// truncate bounds a message sent on the wire.
func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// DefaultStoreLinger bounds how long the rank serving a job's store waits,
// as it closes, for the other ranks to leave it (Config.StoreLinger).
const DefaultStoreLinger = 5 * time.Minute

// openStore opens the store cfg names when it gives none: the one served
// by a rank of the job, or etcd.
func openStore(ctx context.Context, cfg *Config) (Store, error) {
	switch {
	case cfg.ServeStore != "":
		var lc net.ListenConfig
		ln, err := lc.Listen(ctx, "tcp", cfg.ServeStore)
		if err != nil {
			return nil, fmt.Errorf("serve the job's store on %s (another job may hold the port: choose another): %w", cfg.ServeStore, err)
		}
		srv, err := ServeStore(ln, cfg.Secret, cfg.Logger)
		if err != nil {
			_ = ln.Close()
			return nil, err
		}
		return &servedStore{Store: srv.Store(), srv: srv, linger: cfg.StoreLinger, describe: "the store this rank serves on " + ln.Addr().String()}, nil
	case cfg.StoreAddr != "":
		return DialStore(ctx, cfg.StoreAddr, cfg.Secret)
	}
	return NewEtcdStore(ctx, cfg.Client)
}

// servedStore is the store of the rank that serves it: its own memory,
// and the server to close with it.
type servedStore struct {
	Store
	srv      *StoreServer
	linger   time.Duration
	describe string
}

func (s *servedStore) Describe() string { return s.describe }

// Close waits, at most the linger time, until no other rank is still in
// the store: every client hung up or let its lease end.
func (s *servedStore) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), s.linger)
	defer cancel()
	return s.srv.Close(ctx)
}
