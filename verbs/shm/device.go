package shm

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/rdmacell/rdmacell/verbs/internal/soft"
)

// ProviderName is what Provider returns and what endpoints of this
// provider carry.
const ProviderName = "shm"

// handshakeTimeout bounds each step of connecting two QPs. The other side
// answers from a goroutine that does nothing else, so only a dead or
// stopped process takes this long.
const handshakeTimeout = 5 * time.Second

// Options configure a device.
type Options struct {
	// Host names this machine in endpoints (default os.Hostname()). QPs
	// connect only to endpoints of the same host.
	Host string
}

// Device is an opened shared-memory provider. It implements verbs.Device.
type Device struct {
	host string
	addr string
	uid  int
	ln   *net.UnixListener

	tableFd int
	wg      sync.WaitGroup // the accept loop, handshakes and link readers

	mu      sync.Mutex
	closed  bool
	table   *regionTable
	tableB  []byte
	nextQPN uint32
	nextPD  uint32
	nextMem uint32
	qps     map[uint32]*QP
	pds     map[*PD]struct{}
	cqs     map[*soft.CQ]*cqHook
	mems    map[uint32]*memFile
	memOf   map[*verbs.Memory]*memFile
	peers   map[string]*peer
	// handshakes are accepted connections whose hello has not come yet.
	handshakes map[*net.UnixConn]struct{}
}

// memFile is a memory allocation with registered regions, as offered to
// peers: a duplicate of its descriptor (so that it stays valid whatever
// the application does with the allocation) under an id never reused.
type memFile struct {
	id      uint32
	fd      int
	regions int
	remote  int // regions with remote access
}

var _ verbs.Device = (*Device)(nil)

// Open opens a device listening on a fresh abstract unix socket.
func Open(opts Options) (*Device, error) {
	host := opts.Host
	if host == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("shm: host name: %w", err)
		}
		host = h
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	d := &Device{
		host:  host,
		addr:  fmt.Sprintf("@rdmacell-shm-%d-%s", os.Getpid(), hex.EncodeToString(rnd[:])),
		uid:   os.Getuid(),
		qps:   make(map[uint32]*QP),
		pds:   make(map[*PD]struct{}),
		cqs:   make(map[*soft.CQ]*cqHook),
		mems:  make(map[uint32]*memFile),
		memOf: make(map[*verbs.Memory]*memFile),
		peers: make(map[string]*peer),

		handshakes: make(map[*net.UnixConn]struct{}),
	}
	fd, b, err := createSegment("rdmacell-shm-regions", tableSize)
	if err != nil {
		return nil, err
	}
	d.tableFd, d.tableB, d.table = fd, b, newRegionTable(b)
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: d.addr, Net: "unixpacket"})
	if err != nil {
		d.releaseTable()
		return nil, fmt.Errorf("shm: listen on %s: %w", d.addr, err)
	}
	ln.SetUnlinkOnClose(false)
	d.ln = ln
	d.wg.Add(1)
	go d.acceptLoop()
	return d, nil
}

// Provider implements verbs.Device.
func (d *Device) Provider() string { return ProviderName }

// Addr is the device's abstract socket name, as carried in
// verbs.Endpoint.Addr.
func (d *Device) Addr() string { return d.addr }

// Host is the host name the device puts in endpoints.
func (d *Device) Host() string { return d.host }

// AllocPD implements verbs.Device.
func (d *Device) AllocPD() (verbs.PD, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, fmt.Errorf("shm: alloc pd on %s: %w", d.addr, verbs.ErrClosed)
	}
	d.nextPD++
	pd := &PD{dev: d, id: d.nextPD, mrs: &soft.MRTable{}}
	d.pds[pd] = struct{}{}
	return pd, nil
}

// CreateCQ implements verbs.Device. The CQ is a *soft.CQ; polling it
// also advances the QPs that complete into it.
func (d *Device) CreateCQ(depth int) (verbs.CQ, error) {
	cq, err := soft.NewCQ(depth)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, fmt.Errorf("shm: create cq on %s: %w", d.addr, verbs.ErrClosed)
	}
	h := &cqHook{}
	cq.SetProgress(h.run)
	cq.SetPark(h.park)
	d.cqs[cq] = h
	return cq, nil
}

// ownCQ returns c as a CQ of this device.
func (d *Device) ownCQ(c verbs.CQ, which string) (*soft.CQ, error) {
	cq, ok := c.(*soft.CQ)
	d.mu.Lock()
	_, mine := d.cqs[cq]
	d.mu.Unlock()
	if !ok || !mine {
		return nil, fmt.Errorf("%w: %s %T was not created by shm device %s", verbs.ErrInvalidArgument, which, c, d.addr)
	}
	return cq, nil
}

// Close implements verbs.Device: it closes every QP (flushing their
// requests), CQ and region, and stops listening.
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
	for c := range d.handshakes {
		_ = c.Close()
	}
	d.mu.Unlock()
	err := d.ln.Close()
	for _, q := range qps {
		_ = q.Close()
	}
	d.wg.Wait()
	d.mu.Lock()
	for cq := range d.cqs {
		_ = cq.Close()
	}
	for _, mf := range d.mems {
		unix.Close(mf.fd)
	}
	d.mems, d.memOf = map[uint32]*memFile{}, map[*verbs.Memory]*memFile{}
	peers := d.peers
	d.peers = map[string]*peer{}
	d.mu.Unlock()
	for _, p := range peers {
		p.close()
	}
	d.releaseTable()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("shm: close %s: %w", d.addr, err)
	}
	return nil
}

func (d *Device) releaseTable() {
	_ = unix.Munmap(d.tableB)
	unix.Close(d.tableFd)
}

// acquirePeer returns the peer device at addr, mapping its region table
// from tableFd if this is the first link to it. tableFd is consumed.
func (d *Device) acquirePeer(addr string, tableFd int) (*peer, error) {
	defer unix.Close(tableFd)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, fmt.Errorf("shm: device %s: %w", d.addr, verbs.ErrClosed)
	}
	if p := d.peers[addr]; p != nil {
		p.refs++
		return p, nil
	}
	b, err := mapSegment(tableFd, tableSize, unix.PROT_READ)
	if err != nil {
		return nil, fmt.Errorf("shm: region table of %s: %w", addr, err)
	}
	if err := checkPeerTable(b); err != nil {
		_ = unix.Munmap(b)
		return nil, fmt.Errorf("%w (from %s)", err, addr)
	}
	p := &peer{addr: addr, refs: 1, table: peerTable{b: b}, mems: make(map[uint32]*mapping)}
	d.peers[addr] = p
	return p, nil
}

// releasePeer drops a link's reference to p.
func (d *Device) releasePeer(p *peer) {
	d.mu.Lock()
	p.refs--
	last := p.refs == 0 && d.peers[p.addr] == p
	if last {
		delete(d.peers, p.addr)
	}
	d.mu.Unlock()
	if last {
		p.close()
	}
}

// memoryFd returns a duplicate of the descriptor of memory file id, if a
// region with remote access lies in it. Peers get nothing else.
func (d *Device) memoryFd(id uint32) (int, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	mf := d.mems[id]
	if mf == nil || mf.remote == 0 {
		return -1, false
	}
	fd, err := dupFd(mf.fd)
	return fd, err == nil
}
