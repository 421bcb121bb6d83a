// Package netchaos is a TCP forwarder for tests that does to a stream
// what a real network does and loopback never does: it holds bytes back
// for a while and then delivers them (a slow path whose data arrives after
// the sender gave up on it), and it resets a connection at an arbitrary
// byte (a frame cut in half). Peers reach a device through it by
// advertising the proxy's address instead of their own.
package netchaos

import (
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// headLen is how much of what the dialer sends first a link keeps, so
// that a test can tell which connection is which.
const headLen = 64

// Proxy accepts connections and forwards each to the target.
type Proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu     sync.Mutex
	links  map[*Link]struct{}
	closed bool
}

// Link is one forwarded connection: the dialer's side and the target's.
type Link struct {
	in, out *net.TCPConn

	mu   sync.Mutex
	head []byte
	// holdUntil is, per direction (0: dialer to target, 1: back), the time
	// before which nothing more is delivered.
	holdUntil [2]time.Time
	cut       bool
	ended     int // directions whose pump returned
}

// Listen starts a proxy on a free loopback port. It refuses connections
// until Forward names where they go.
func Listen() (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, links: make(map[*Link]struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Forward sets the address the proxy forwards to. A device that
// advertises the proxy learns its own listening address only once open,
// after the proxy's address was needed.
func (p *Proxy) Forward(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = target
}

// Addr is the address peers dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		target := p.target
		p.mu.Unlock()
		if target == "" {
			_ = c.Close()
			continue
		}
		out, err := net.Dial("tcp", target)
		if err != nil {
			_ = c.Close()
			continue
		}
		l := &Link{in: c.(*net.TCPConn), out: out.(*net.TCPConn)}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			l.reset()
			continue
		}
		p.links[l] = struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pump(l, 0, l.in, l.out)
		go p.pump(l, 1, l.out, l.in)
	}
}

// pump forwards one direction in chunks of random size, so that a cut
// or a hold falls anywhere in the stream, in the middle of a message as
// often as between two. What the source sent before it closed is still
// delivered, late if held: TCP does the same with data in flight.
func (p *Proxy) pump(l *Link, dir int, src, dst *net.TCPConn) {
	defer p.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf[:1+rand.IntN(len(buf))])
		if n > 0 {
			if dir == 0 {
				l.keepHead(buf[:n])
			}
			l.waitHold(dir)
			if _, werr := dst.Write(buf[:n]); werr != nil {
				l.reset()
				break
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				_ = dst.CloseWrite()
			} else {
				l.reset()
			}
			break
		}
	}
	p.mu.Lock()
	if l.finished() {
		delete(p.links, l)
	}
	p.mu.Unlock()
}

func (l *Link) keepHead(b []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := headLen - len(l.head); n > 0 {
		l.head = append(l.head, b[:min(n, len(b))]...)
	}
}

// waitHold sleeps until direction dir is no longer held.
func (l *Link) waitHold(dir int) {
	for {
		l.mu.Lock()
		d := time.Until(l.holdUntil[dir])
		cut := l.cut
		l.mu.Unlock()
		if d <= 0 || cut {
			return
		}
		time.Sleep(d)
	}
}

// finished records that one direction ended and reports whether both have.
func (l *Link) finished() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ended++
	return l.ended == 2
}

// reset closes both sides abortively: each end sees a connection reset,
// whatever it had not read yet is lost.
func (l *Link) reset() {
	l.mu.Lock()
	l.cut = true
	l.mu.Unlock()
	for _, c := range []*net.TCPConn{l.in, l.out} {
		_ = c.SetLinger(0)
		_ = c.Close()
	}
}

// Head returns the first bytes the dialer sent on the link (up to 64).
func (l *Link) Head() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]byte(nil), l.head...)
}

// Links returns the links forwarding now.
func (p *Proxy) Links() []*Link {
	p.mu.Lock()
	defer p.mu.Unlock()
	ls := make([]*Link, 0, len(p.links))
	for l := range p.links {
		ls = append(ls, l)
	}
	return ls
}

// Hold delays everything the link carries in direction dir (0: from the
// dialer, 1: to it) for d from now; the bytes are delivered afterwards,
// in order.
func (l *Link) Hold(dir int, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.holdUntil[dir&1] = time.Now().Add(d)
}

// Cut resets the link at once, wherever its streams are.
func (l *Link) Cut() { l.reset() }

// Close stops accepting, resets every link and waits for the forwarding
// goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true // no link is added from now on
	p.mu.Unlock()
	err := p.ln.Close()
	for _, l := range p.Links() {
		l.reset()
	}
	p.wg.Wait()
	return err
}
