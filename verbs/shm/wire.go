package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// Control messages travel over a SOCK_SEQPACKET unix socket, one message
// per packet, so boundaries are kept and descriptors passed with
// SCM_RIGHTS arrive with the message they belong to. The socket carries
// only the cold path: the connection handshake and the memory files a
// requester maps; requests and acknowledgements go through the shared
// segment.
//
//	hello (dialer → listener), fds: pair segment, dialer's region table
//	   0 type u8 = 1, version u8, 0 u16
//	   4 from QPN u32, 8 to QPN u32, 12 PSN u32, 16 PD u32
//	  20 min RNR timer ns u64, 28 addr length u16, 30 addr
//	reply (listener → dialer), fds: listener's region table when accepted
//	   0 type u8 = 2, status u8 (0 accepted, 1 refused), 0 u16
//	   4 PD u32, 8 min RNR timer ns u64, 16 reason length u16, 18 reason
//	fetch (either way), no fds
//	   0 type u8 = 3, 0 u8 ×3, 4 request u32, 8 memory id u32
//	memory (answer to fetch), fds: the memory file when status is 0
//	   0 type u8 = 4, status u8 (0 ok, 1 unknown), 0 u16, 4 request u32,
//	   8 memory id u32
//
// Decoders are strict: a wrong length, a reserved byte that is not zero,
// or a wrong number of descriptors is a protocol error that closes the
// connection.
const (
	msgHello  = 1
	msgReply  = 2
	msgFetch  = 3
	msgMemory = 4

	wireVersion = 1
	maxAddrLen  = 108 // the length of sun_path
	maxReason   = 200
	maxMsg      = 512
	maxFds      = 2
)

var errProtocol = errors.New("shm: protocol error")

type hello struct {
	fromQPN, toQPN, psn, pd uint32
	minRNR                  time.Duration
	addr                    string
}

type reply struct {
	refused bool
	pd      uint32
	minRNR  time.Duration
	reason  string
}

func (h hello) encode() []byte {
	b := make([]byte, 30+len(h.addr))
	b[0], b[1] = msgHello, wireVersion
	le := binary.LittleEndian
	le.PutUint32(b[4:], h.fromQPN)
	le.PutUint32(b[8:], h.toQPN)
	le.PutUint32(b[12:], h.psn)
	le.PutUint32(b[16:], h.pd)
	le.PutUint64(b[20:], uint64(h.minRNR))
	le.PutUint16(b[28:], uint16(len(h.addr)))
	copy(b[30:], h.addr)
	return b
}

func decodeHello(b []byte) (hello, error) {
	le := binary.LittleEndian
	if len(b) < 30 || b[0] != msgHello || b[2] != 0 || b[3] != 0 {
		return hello{}, fmt.Errorf("%w: malformed hello (%d bytes)", errProtocol, len(b))
	}
	if b[1] != wireVersion {
		return hello{}, fmt.Errorf("%w: hello version %d, want %d", errProtocol, b[1], wireVersion)
	}
	n := int(le.Uint16(b[28:]))
	if n == 0 || n > maxAddrLen || len(b) != 30+n {
		return hello{}, fmt.Errorf("%w: hello address of %d bytes in a %d-byte message", errProtocol, n, len(b))
	}
	h := hello{
		fromQPN: le.Uint32(b[4:]),
		toQPN:   le.Uint32(b[8:]),
		psn:     le.Uint32(b[12:]),
		pd:      le.Uint32(b[16:]),
		minRNR:  time.Duration(le.Uint64(b[20:])),
		addr:    string(b[30:]),
	}
	if h.minRNR < 0 || h.minRNR > maxMinRNR {
		return hello{}, fmt.Errorf("%w: hello min RNR timer %v", errProtocol, h.minRNR)
	}
	return h, nil
}

func (r reply) encode() []byte {
	reason := r.reason
	if len(reason) > maxReason {
		reason = reason[:maxReason]
	}
	b := make([]byte, 18+len(reason))
	b[0] = msgReply
	if r.refused {
		b[1] = 1
	}
	le := binary.LittleEndian
	le.PutUint32(b[4:], r.pd)
	le.PutUint64(b[8:], uint64(r.minRNR))
	le.PutUint16(b[16:], uint16(len(reason)))
	copy(b[18:], reason)
	return b
}

func decodeReply(b []byte) (reply, error) {
	le := binary.LittleEndian
	if len(b) < 18 || b[0] != msgReply || b[1] > 1 || b[2] != 0 || b[3] != 0 {
		return reply{}, fmt.Errorf("%w: malformed reply (%d bytes)", errProtocol, len(b))
	}
	n := int(le.Uint16(b[16:]))
	if n > maxReason || len(b) != 18+n {
		return reply{}, fmt.Errorf("%w: reply reason of %d bytes in a %d-byte message", errProtocol, n, len(b))
	}
	r := reply{refused: b[1] == 1, pd: le.Uint32(b[4:]), minRNR: time.Duration(le.Uint64(b[8:])), reason: string(b[18:])}
	if r.minRNR < 0 || r.minRNR > maxMinRNR {
		return reply{}, fmt.Errorf("%w: reply min RNR timer %v", errProtocol, r.minRNR)
	}
	return r, nil
}

// encodeFetch and encodeMemory build the fixed 12-byte messages.
func encodeFetch(req, memID uint32) []byte { return fixed(msgFetch, 0, req, memID) }

func encodeMemory(ok bool, req, memID uint32) []byte {
	var st byte = 1
	if ok {
		st = 0
	}
	return fixed(msgMemory, st, req, memID)
}

func fixed(typ, status byte, req, memID uint32) []byte {
	b := make([]byte, 12)
	b[0], b[1] = typ, status
	binary.LittleEndian.PutUint32(b[4:], req)
	binary.LittleEndian.PutUint32(b[8:], memID)
	return b
}

// decodeFixed decodes a fetch or memory message.
func decodeFixed(b []byte) (typ, status byte, req, memID uint32, err error) {
	if len(b) != 12 || (b[0] != msgFetch && b[0] != msgMemory) || b[2] != 0 || b[3] != 0 ||
		(b[0] == msgFetch && b[1] != 0) || b[1] > 1 {
		return 0, 0, 0, 0, fmt.Errorf("%w: malformed message (%d bytes, type %d)", errProtocol, len(b), firstByte(b))
	}
	return b[0], b[1], binary.LittleEndian.Uint32(b[4:]), binary.LittleEndian.Uint32(b[8:]), nil
}

func firstByte(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	return int(b[0])
}

// wantFds is how many descriptors a message must carry.
func wantFds(msg []byte) int {
	switch {
	case len(msg) < 2:
		return 0
	case msg[0] == msgHello:
		return 2
	case msg[0] == msgReply && msg[1] == 0, msg[0] == msgMemory && msg[1] == 0:
		return 1
	}
	return 0
}

// send writes one message with fds attached.
func send(c *net.UnixConn, msg []byte, fds ...int) error {
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	_, _, err := c.WriteMsgUnix(msg, oob, nil)
	return err
}

// receive reads one message into buf and returns it with the descriptors
// that came with it. The number of descriptors is checked against the
// message type; on any error the descriptors are closed.
func receive(c *net.UnixConn, buf, oob []byte) ([]byte, []int, error) {
	n, oobn, flags, _, err := c.ReadMsgUnix(buf, oob)
	var fds []int
	if oobn > 0 {
		msgs, perr := unix.ParseSocketControlMessage(oob[:oobn])
		if perr != nil && err == nil {
			err = fmt.Errorf("%w: control message: %v", errProtocol, perr)
		}
		for _, m := range msgs {
			if got, rerr := unix.ParseUnixRights(&m); rerr == nil {
				fds = append(fds, got...)
			} else if err == nil {
				err = fmt.Errorf("%w: unexpected control message", errProtocol)
			}
		}
	}
	switch {
	case errors.Is(err, io.EOF), err == nil && n == 0 && oobn == 0:
		err = errEOF
	case err != nil:
		err = errEOF
	case flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0:
		err = fmt.Errorf("%w: message truncated", errProtocol)
	case len(fds) != wantFds(buf[:n]):
		err = fmt.Errorf("%w: message type %d came with %d descriptors", errProtocol, buf[0], len(fds))
	}
	if err != nil {
		closeFds(fds)
		return nil, nil, err
	}
	return buf[:n], fds, nil
}

var errEOF = errors.New("shm: connection closed by peer")

func closeFds(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// oobSpace is the control buffer size for maxFds descriptors.
var oobSpace = unix.CmsgSpace(4 * maxFds)
