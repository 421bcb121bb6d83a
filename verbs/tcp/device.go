package tcp

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/rdmacell/rdmacell/verbs/internal/soft"
)

// Options configure a Device. Zero values take the documented defaults,
// except Secret, which is required.
type Options struct {
	// ListenAddr is where the device accepts its peers' connections
	// (default "127.0.0.1:0"). Listening on an unspecified address
	// ("0.0.0.0:0", ":7000") advertises Host in Addr instead.
	ListenAddr string
	// AdvertiseAddr, if set, is the address put in endpoints instead of
	// the listening one: for peers that reach this device through a
	// forwarder (a NAT rule, a proxy) at another address.
	AdvertiseAddr string
	// Secret is the per-job secret both ends of every connection prove
	// they know; at least 16 bytes. The bootstrap supplies it.
	Secret []byte
	// Host identifies the machine in endpoints (default os.Hostname()).
	Host string
	// HandshakeTimeout bounds one connection handshake (default 5s).
	HandshakeTimeout time.Duration
	// DialTimeout bounds one dial attempt (default 3s).
	DialTimeout time.Duration
	// ConnectTimeout is how long a QP in RTR keeps trying to connect
	// before it moves to StateErr (default 30s). Requests posted while it
	// waits fail earlier, after the QP's Timeout × (RetryCount+1).
	ConnectTimeout time.Duration
	// Logger receives connection failures, refused peers and protocol
	// violations (default slog.Default()).
	Logger *slog.Logger
}

// MinSecretLen is the shortest secret Open accepts.
const MinSecretLen = 16

// maxHandshakes bounds the handshakes in progress, so that a flood of
// connections cannot make the device start unbounded goroutines.
const maxHandshakes = 256

// Device is an opened TCP provider: a listener for its QPs' connections,
// the protection domains and CQs created from it. It implements
// verbs.Device.
type Device struct {
	opts   Options
	secret []byte
	ln     *net.TCPListener
	addr   string
	log    *slog.Logger
	warn   *warnLimiter // every warning goes through it
	hsSem  chan struct{}
	wg     sync.WaitGroup // accept loop and handshakes
	// lingering counts the connections that said goodbye and wait, in
	// the background, for their peer to close (see link.leave).
	lingering sync.WaitGroup
	// ackDelay and lazyDelay are the package's; tests change them before
	// the device has QPs, to take the timer out of what they count.
	ackDelay, lazyDelay time.Duration
	// writes and requestWrites count the batches its connections wrote
	// (see Writes).
	writes, requestWrites atomic.Uint64

	mu      sync.Mutex
	closed  bool
	qps     map[uint32]*QP
	cqs     map[*soft.CQ]*holds
	pds     map[*PD]struct{}
	hs      map[net.Conn]struct{} // connections in handshake, closed by Close
	nextQPN uint32
}

var _ verbs.Device = (*Device)(nil)

// Open validates opts, starts listening and returns the device.
func Open(opts Options) (*Device, error) {
	if len(opts.Secret) < MinSecretLen {
		return nil, fmt.Errorf("%w: tcp secret of %d bytes, want at least %d", verbs.ErrInvalidArgument, len(opts.Secret), MinSecretLen)
	}
	if a := opts.AdvertiseAddr; a != "" {
		if _, _, err := net.SplitHostPort(a); err != nil || len(a) > maxAddrLen {
			return nil, fmt.Errorf("%w: tcp advertise address %q is not host:port of at most %d bytes", verbs.ErrInvalidArgument, a, maxAddrLen)
		}
	}
	if opts.ListenAddr == "" {
		opts.ListenAddr = "127.0.0.1:0"
	}
	if opts.Host == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("tcp: host name: %w", err)
		}
		opts.Host = h
	}
	if opts.HandshakeTimeout <= 0 {
		opts.HandshakeTimeout = 5 * time.Second
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 3 * time.Second
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 30 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	l, err := net.Listen("tcp", opts.ListenAddr)
	if err != nil {
		return nil, fmt.Errorf("tcp: listen on %q: %w", opts.ListenAddr, err)
	}
	ln := l.(*net.TCPListener)
	la := ln.Addr().(*net.TCPAddr)
	addr := la.String()
	switch {
	case opts.AdvertiseAddr != "":
		addr = opts.AdvertiseAddr
	case la.IP.IsUnspecified():
		addr = net.JoinHostPort(opts.Host, fmt.Sprint(la.Port))
	}
	d := &Device{
		opts:      opts,
		ackDelay:  ackDelay,
		lazyDelay: lazyDelay,
		secret:    append([]byte(nil), opts.Secret...),
		ln:        ln,
		addr:      addr,
		log:       log.With("provider", "tcp", "addr", addr),
		hsSem:     make(chan struct{}, maxHandshakes),
		warn:      newWarnLimiter(log.With("provider", "tcp", "addr", addr), warnInterval),
		qps:       make(map[uint32]*QP),
		cqs:       make(map[*soft.CQ]*holds),
		pds:       make(map[*PD]struct{}),
		hs:        make(map[net.Conn]struct{}),
		// QPNs start at a random point so that a peer holding an endpoint
		// of an earlier device on the same address does not find a QP.
		nextQPN: randUint32() | 1,
	}
	d.wg.Add(1)
	go d.acceptLoop()
	return d, nil
}

// WriteCounts are the batches a device's connections wrote to the wire,
// each one writev unless it was larger than the socket took at once, and
// how many of them carried requests; the others carried acknowledgements
// or other control frames alone. On this provider a consumer pays per
// write, so they say what a message costs it.
type WriteCounts struct{ Batches, WithRequests uint64 }

// Writes returns the device's write counts so far.
func (d *Device) Writes() WriteCounts {
	return WriteCounts{Batches: d.writes.Load(), WithRequests: d.requestWrites.Load()}
}

// Provider implements verbs.Device.
func (d *Device) Provider() string { return "tcp" }

// Addr is the address peers dial to reach this device's QPs; it is the
// Addr of every endpoint the device hands out.
func (d *Device) Addr() string { return d.addr }

// ListenAddr is the address the device listens on; it differs from Addr
// when Options.AdvertiseAddr names a forwarder.
func (d *Device) ListenAddr() string { return d.ln.Addr().String() }

// Host is the machine name the device puts in endpoints.
func (d *Device) Host() string { return d.opts.Host }

// AllocPD implements verbs.Device.
func (d *Device) AllocPD() (verbs.PD, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, fmt.Errorf("tcp: alloc PD: %w", verbs.ErrClosed)
	}
	pd := &PD{d: d}
	d.pds[pd] = struct{}{}
	return pd, nil
}

// CreateCQ implements verbs.Device. The CQ is a *soft.CQ; QPs of this
// device accept only CQs it created. A goroutine about to block in its
// Wait releases the acknowledgements held for answers to the requests
// whose receives complete into it (see holds).
func (d *Device) CreateCQ(depth int) (verbs.CQ, error) {
	cq, err := soft.NewCQ(depth)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, fmt.Errorf("tcp: create CQ: %w", verbs.ErrClosed)
	}
	h := &holds{}
	cq.SetPark(h.release)
	d.cqs[cq] = h
	return cq, nil
}

// ownCQ returns c as a CQ of this device, with its held acknowledgements,
// or an error naming what it is.
func (d *Device) ownCQ(c verbs.CQ, which string) (*soft.CQ, *holds, error) {
	cq, ok := c.(*soft.CQ)
	var h *holds
	if ok {
		d.mu.Lock()
		h, ok = d.cqs[cq]
		d.mu.Unlock()
	}
	if !ok {
		return nil, nil, fmt.Errorf("%w: %s %T was not created by this tcp device", verbs.ErrInvalidArgument, which, c)
	}
	return cq, h, nil
}

// Close implements verbs.Device: it stops listening, moves every open QP
// to StateErr (flushing its requests) and closes it.
func (d *Device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	qps := make([]*QP, 0, len(d.qps))
	for _, q := range d.qps {
		qps = append(qps, q)
	}
	for c := range d.hs {
		c.Close()
	}
	d.mu.Unlock()
	// The QPs go first, the listener last: a peer whose connection ends
	// without a goodbye probes the listener to tell a reset QP from a dead
	// process (see QP.peerAlive), so it must stay until the QPs are gone.
	// Connections accepted meanwhile are closed at once (d.closed).
	var err error
	for _, q := range qps {
		if cerr := q.Close(); cerr != nil && !errors.Is(cerr, verbs.ErrClosed) {
			err = errors.Join(err, cerr)
		}
	}
	d.lingering.Wait()
	if lerr := d.ln.Close(); !errors.Is(lerr, net.ErrClosed) {
		err = errors.Join(err, lerr)
	}
	d.wg.Wait()
	d.lingering.Wait()
	d.warn.close()
	d.mu.Lock()
	clear(d.cqs)
	clear(d.pds)
	d.mu.Unlock()
	return err
}

// trackHandshake registers c as in handshake until the returned function
// runs; it reports false if the device is closed.
func (d *Device) trackHandshake(c net.Conn) (untrack func(), ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, false
	}
	d.hs[c] = struct{}{}
	return func() {
		d.mu.Lock()
		delete(d.hs, c)
		d.mu.Unlock()
	}, true
}

func (d *Device) addQP(q *QP) (uint32, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return 0, fmt.Errorf("tcp: create QP: %w", verbs.ErrClosed)
	}
	for {
		n := d.nextQPN
		d.nextQPN++
		if _, used := d.qps[n]; !used && n != 0 {
			d.qps[n] = q
			return n, nil
		}
	}
}

func (d *Device) removeQP(q *QP) {
	d.mu.Lock()
	if d.qps[q.qpn] == q {
		delete(d.qps, q.qpn)
	}
	d.mu.Unlock()
}

func (d *Device) lookupQP(qpn uint32) *QP {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.qps[qpn]
}
