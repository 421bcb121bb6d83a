package collectives

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
)

// A fingerprint is what must be equal on every rank for an operation's
// messages to line up: the sequence number, the collective, the element
// type, the count, the op, the root, the algorithm and the chunk size
// (which decides how many messages a pipeline sends). Its 32-byte record
// is what ranks exchange before an operation; a hash of it is part of
// every data message's tag.
type fingerprint struct {
	seq   uint32
	root  int32
	count uint64 // the collective's count; see the api for which
	vhash uint64 // hash of the counts of the V collectives but AllToAllV, 0 elsewhere
	chunk uint32 // for the pipelined algorithms, 0 for the others
	kind  kind
	dt    dtype
	op    Op
	algo  Algorithm
	mode  mode // of a reduction; shares the op's byte
}

const fpSize = 32

func (f *fingerprint) put(b []byte) {
	binary.LittleEndian.PutUint32(b[0:], f.seq)
	binary.LittleEndian.PutUint32(b[4:], uint32(f.root))
	binary.LittleEndian.PutUint64(b[8:], f.count)
	binary.LittleEndian.PutUint64(b[16:], f.vhash)
	binary.LittleEndian.PutUint32(b[24:], f.chunk)
	b[28], b[29], b[30], b[31] = byte(f.kind), byte(f.dt), byte(f.op)|byte(f.mode)<<4, byte(f.algo)
}

func getFingerprint(b []byte) fingerprint {
	return fingerprint{
		seq:   binary.LittleEndian.Uint32(b[0:]),
		root:  int32(binary.LittleEndian.Uint32(b[4:])),
		count: binary.LittleEndian.Uint64(b[8:]),
		vhash: binary.LittleEndian.Uint64(b[16:]),
		chunk: binary.LittleEndian.Uint32(b[24:]),
		kind:  kind(b[28]), dt: dtype(b[29]), op: Op(b[30] & 15), algo: Algorithm(b[31]), mode: mode(b[30] >> 4),
	}
}

// hash is FNV-1a over the record.
func (f *fingerprint) hash() uint64 {
	var rec [fpSize]byte
	f.put(rec[:])
	h := uint64(14695981039346656037)
	for _, c := range rec {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// hashInts is FNV-1a over a count vector.
func hashInts(v []int) uint64 {
	h := uint64(14695981039346656037)
	for _, x := range v {
		for i := 0; i < 64; i += 8 {
			h ^= uint64(x>>i) & 0xff
			h *= 1099511628211
		}
	}
	return h
}

// String describes the call in words, for mismatch reports.
func (f fingerprint) String() string {
	var b strings.Builder
	b.WriteString(f.kind.String())
	b.WriteByte('(')
	var parts []string
	switch f.kind {
	case kBarrier:
	case kAllToAllV:
		parts = append(parts, f.dt.String())
	case kAllGatherV, kGatherV, kScatterV, kReduceScatterV:
		parts = append(parts, fmt.Sprintf("%s ×%d in all, counts %#x", f.dt, f.count, f.vhash&0xffffff))
	default:
		parts = append(parts, fmt.Sprintf("%s ×%d", f.dt, f.count))
	}
	if f.kind.reduces() {
		parts = append(parts, f.op.String())
		if f.mode != modeDefault {
			parts = append(parts, f.mode.String())
		}
	}
	if f.kind.rooted() {
		parts = append(parts, fmt.Sprintf("root %d", f.root))
	}
	parts = append(parts, f.algo.String())
	if f.chunk != 0 {
		parts = append(parts, fmt.Sprintf("chunk %d", f.chunk))
	}
	b.WriteString(strings.Join(parts, ", "))
	fmt.Fprintf(&b, ") #%d", f.seq)
	return b.String()
}

// Tags. A data message's tag is 0, 23 bits of the fingerprint hash, the
// collective (8 bits) and the algorithm's step (32 bits), so a message of
// another operation fails the receive instead of being taken. Messages of
// the fingerprint exchange have the top bit set and carry only the round:
// every operation exchanges fingerprints in the same pattern, so ranks in
// different collectives still complete the exchange and can all report
// the disagreement.
const (
	tagVerify  = uint64(1) << 63
	tagHashLSB = 40
)

// dataTagBase is the tag of an operation's data messages, without the
// step, from its fingerprint and the fingerprint's hash.
func dataTagBase(f *fingerprint, hash uint64) uint64 {
	return (hash&(1<<23-1))<<tagHashLSB | uint64(f.kind)<<32
}

// describeTag says in words what a tag belongs to.
func describeTag(t uint64) string {
	if t&tagShare == tagShare {
		return fmt.Sprintf("a shared-memory setup message (round %d)", uint32(t))
	}
	if t&tagVerify != 0 {
		return fmt.Sprintf("a fingerprint-exchange message (round %d)", uint32(t))
	}
	return fmt.Sprintf("a message of %s (fingerprint %#x, step %d)", kind(t>>32), t>>tagHashLSB, uint32(t))
}

// disagreement builds the error for records that are not all equal.
// recs[i] is rank i's fingerprint. The result is the same on every rank
// but for Rank.
func disagreement(rank int, mine fingerprint, recs []fingerprint) *MismatchError {
	type call struct {
		f     fingerprint
		ranks []int
	}
	var calls []call
	for r, f := range recs {
		i := slices.IndexFunc(calls, func(c call) bool { return c.f == f })
		if i < 0 {
			calls = append(calls, call{f: f})
			i = len(calls) - 1
		}
		calls[i].ranks = append(calls[i].ranks, r)
	}
	major := 0 // calls are ordered by their lowest rank, so ties go to it
	for i, c := range calls {
		if len(c.ranks) > len(calls[major].ranks) {
			major = i
		}
	}
	var odd []int
	var words []string
	for i, c := range calls {
		if i != major {
			odd = append(odd, c.ranks...)
		}
		who := "rank "
		if len(c.ranks) > 1 {
			who = "ranks "
		}
		words = append(words, who+rankList(c.ranks)+" called "+c.f.String())
	}
	slices.Sort(odd)
	return &MismatchError{Rank: rank, Op: mine.kind.String(), Seq: uint64(mine.seq), Odd: odd, Detail: strings.Join(words, "; ")}
}
