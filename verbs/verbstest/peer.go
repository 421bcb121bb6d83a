package verbstest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rdmacell/rdmacell/verbs"
)

// peerLifetime bounds a peer process. It exits when its parent closes its
// standard input, as the parent does when it dies, and at the latest after
// this long, so that no test run leaves one behind.
const peerLifetime = 2 * time.Minute

// servePeer answers the requests on in until in ends, and returns the
// process's exit code.
func servePeer(p Provider, in io.Reader, out io.Writer) int {
	deadline := time.AfterFunc(peerLifetime, func() {
		fmt.Fprintf(os.Stderr, "verbstest peer (%s): exiting after %v\n", p.Name, peerLifetime)
		os.Exit(3)
	})
	defer deadline.Stop()
	s := &peerState{p: p}
	defer s.close()
	dec, enc := json.NewDecoder(in), json.NewEncoder(out)
	for {
		var req request
		if err := dec.Decode(&req); err != nil {
			if errors.Is(err, io.EOF) {
				return 0
			}
			fmt.Fprintf(os.Stderr, "verbstest peer (%s): read request: %v\n", p.Name, err)
			return 2
		}
		rep, err := s.handle(req)
		if err != nil {
			rep = reply{Err: fmt.Sprintf("%s: %v", req.Op, err)}
		}
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(os.Stderr, "verbstest peer (%s): write reply: %v\n", p.Name, err)
			return 2
		}
	}
}

// peerState is the peer's device, its one region and its one QP.
type peerState struct {
	p        Provider
	dev      verbs.Device
	mem      *verbs.Memory
	mr       verbs.MR
	qp       verbs.QP
	send     verbs.CQ
	recv     verbs.CQ
	nextRecv uint64
}

func (s *peerState) handle(req request) (reply, error) {
	if req.Op != opInit && s.qp == nil {
		return reply{}, errors.New("no QP: init first")
	}
	switch req.Op {
	case opInit:
		return s.init(req.Size)
	case opConnect:
		if req.Endpoint == nil {
			return reply{}, errors.New("no endpoint")
		}
		if err := s.qp.Modify(verbs.StateRTR, req.Endpoint); err != nil {
			return reply{}, err
		}
		return reply{}, s.qp.Modify(verbs.StateRTS, nil)
	case opRecv:
		for range req.N {
			s.nextRecv++
			if _, err := s.qp.PostRecv(&verbs.RecvWR{ID: s.nextRecv}); err != nil {
				return reply{}, err
			}
		}
		return reply{}, nil
	case opWait:
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		wcs, err := collect(ctx, s.recv, req.N)
		return reply{WCs: wcs}, err
	case opSum:
		b := s.mr.Bytes()
		if req.Off < 0 || req.Len < 0 || req.Off+req.Len > len(b) {
			return reply{}, fmt.Errorf("range %d+%d outside the %d-byte region", req.Off, req.Len, len(b))
		}
		sum := sha256.Sum256(b[req.Off : req.Off+req.Len])
		return reply{Sum: hex.EncodeToString(sum[:])}, nil
	case opWrite:
		if req.Len <= 0 || req.Len > s.mr.Len() {
			return reply{}, fmt.Errorf("length %d outside the %d-byte region", req.Len, s.mr.Len())
		}
		fill(s.mr.Bytes()[:req.Len], req.Seed)
		wr := write(1, s.mr, 0, req.Len, remote{req.Addr, req.RKey}, 0)
		if _, err := s.qp.PostSend(wr); err != nil {
			return reply{}, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		wcs, err := collect(ctx, s.send, 1)
		return reply{WCs: wcs}, err
	}
	return reply{}, fmt.Errorf("unknown operation %q", req.Op)
}

func (s *peerState) init(size int) (reply, error) {
	if s.dev != nil {
		return reply{}, errors.New("already initialised")
	}
	var err error
	if s.dev, err = s.p.Open(); err != nil {
		return reply{}, err
	}
	pd, err := s.dev.AllocPD()
	if err != nil {
		return reply{}, err
	}
	if s.mem, err = verbs.Alloc(size); err != nil {
		return reply{}, err
	}
	if s.mr, err = pd.RegMR(s.mem.Bytes(), remoteRW); err != nil {
		return reply{}, err
	}
	if s.send, err = s.dev.CreateCQ(64); err != nil {
		return reply{}, err
	}
	if s.recv, err = s.dev.CreateCQ(64); err != nil {
		return reply{}, err
	}
	q, err := pd.CreateQP(verbs.QPConfig{SendCQ: s.send, RecvCQ: s.recv, RetryCount: patientRetries})
	if err != nil {
		return reply{}, err
	}
	if err := q.Modify(verbs.StateInit, nil); err != nil {
		return reply{}, err
	}
	s.qp = q
	ep := q.Endpoint()
	return reply{Pid: os.Getpid(), Endpoint: &ep, Addr: s.mr.Addr(), RKey: s.mr.RKey(), Len: s.mr.Len()}, nil
}

func (s *peerState) close() {
	if s.dev == nil {
		return
	}
	if err := s.dev.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "verbstest peer (%s): close device: %v\n", s.p.Name, err)
		return
	}
	if s.mem != nil {
		_ = s.mem.Free()
	}
}
