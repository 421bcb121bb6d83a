package bind_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rdmacell/rdmacell/cell"
	"github.com/rdmacell/rdmacell/cell/bind"
	"github.com/rdmacell/rdmacell/verbs"
)

// recorder is an Actor that notes what it was asked, in order.
type recorder struct{ got []string }

func (r *recorder) PostRecv(x *cell.RecvPost)     { r.add("recv path=%d n=%d", x.Path, x.Count) }
func (r *recorder) StartReset(x *cell.Reset)      { r.add("reset path=%d", x.Path) }
func (r *recorder) PostCell(x *cell.Post)         { r.add("post path=%d cell=%d", x.Path, x.Cell) }
func (r *recorder) WriteToken(x *cell.TokenWrite) { r.add("token path=%d cell=%d", x.Path, x.Token.ID) }
func (r *recorder) WriteGrant(x *cell.GrantWrite) { r.add("grant path=%d seq=%d", x.Path, x.Grant.Seq) }
func (r *recorder) WriteFinal(x *cell.FinalWrite) { r.add("final path=%d seq=%d", x.Path, x.Final.Seq) }
func (r *recorder) WriteHold(x *cell.HoldWrite)   { r.add("hold path=%d seq=%d", x.Path, x.Hold.Seq) }
func (r *recorder) WriteHoldAck(x *cell.HoldAckWrite) {
	r.add("hold-ack path=%d seq=%d done=%v", x.Path, x.Ack.Seq, x.Ack.Done)
}
func (r *recorder) Failed(err error)       { r.add("failed %v", errors.Is(err, cell.ErrNoPath)) }
func (r *recorder) Event(x *cell.Event)    { r.add("%v tag=%d err=%v", x.Kind, x.Tag, x.Err != nil) }
func (r *recorder) add(f string, a ...any) { r.got = append(r.got, fmt.Sprintf(f, a...)) }

// Act hands out a batch in the order Ready documents, and the terminal
// failure before the failed ranges.
func TestActOrder(t *testing.T) {
	e, err := cell.New(cell.Config{Peer: "B", Paths: 2, RecvDepth: 1, CellSize: 4096, MTU: 4096})
	require.NoError(t, err)
	r := &recorder{}
	recv := e.Ready().Recvs[0].WR.ID // the batch Act takes next
	bind.Act(e, r)
	require.Equal(t, []string{"recv path=0 n=1", "recv path=1 n=1"}, r.got)

	// A cell arrives (a token and a receive posted again), a range is
	// received (a grant), one is sent (a cell), and path 1 fails (a
	// reset): one batch.
	r.got = nil
	require.NoError(t, e.Completion(1, 0, verbs.WC{ID: recv, Status: verbs.StatusSuccess, Opcode: verbs.OpRecvWriteImm,
		Flags: verbs.WCWithImm, ByteLen: 4096, Imm: 7}))
	require.NoError(t, e.Recv(1, cell.RecvRange{Tag: 1, Addr: 1 << 20, RKey: 1, Len: 10}))
	require.NoError(t, e.Send(1, cell.SendRange{Tag: 2, Addr: 1 << 30, LKey: 2, Len: 10}))
	e.Grant(1, cell.Grant{Seq: 0, Addr: 1 << 40, RKey: 3, Len: 10})
	require.NoError(t, e.PathFailed(1, 1, nil))
	bind.Act(e, r)
	require.Equal(t, []string{"recv path=0 n=1", "reset path=1", "post path=0 cell=0", "token path=0 cell=7", "grant path=0 seq=0"}, r.got)

	r.got = nil
	require.NoError(t, e.PathDead(2, 0, nil))
	require.NoError(t, e.PathDead(2, 1, nil))
	bind.Act(e, r)
	require.Equal(t, []string{"failed true", "sent tag=2 err=true", "received tag=1 err=true"}, r.got)
}

// A token ring: a token is taken from its cell's slot only for a cell
// posted on the path, settles every cell before it there, and leaves its
// slot zeroed; another path's token, a token of an older round of the
// window and a torn write are left alone.
func TestTokenRing(t *testing.T) {
	const window = 4
	e, err := cell.New(cell.Config{Peer: "B", Paths: 2, Window: window, RecvDepth: 4, CellSize: 4096, MTU: 4096})
	require.NoError(t, err)
	e.Ready()
	require.NoError(t, e.Send(0, cell.SendRange{Tag: 1, Addr: 1 << 30, LKey: 1, Len: 3 * 4096}))
	e.Grant(0, cell.Grant{Seq: 0, Addr: 1 << 40, RKey: 2, Len: 3 * 4096})
	buf := make([]byte, window*cell.TokenSize)
	var r bind.TokenRing
	r.Init(buf, window, 4)
	var on0 []uint32
	for _, p := range e.Ready().Posts {
		if p.Path == 0 {
			r.Posted(p.Cell)
			on0 = append(on0, p.Cell)
		}
	}
	require.GreaterOrEqual(t, len(on0), 2, "the policy spreads three cells over two paths")
	put := func(id uint32, path int) {
		require.Equal(t, int(id%window), cell.TokenSlot(id, window))
		cell.PutToken(r.Slot(id), cell.Token{ID: id, Path: path, Status: cell.TokenOK, RxTime: 5})
	}
	last := on0[len(on0)-1]
	put(last, 1) // a token naming another path
	require.False(t, r.Poll(10, e, 0))
	put(last+window, 0) // an older round's id in the same slot
	require.False(t, r.Poll(10, e, 0))
	require.True(t, r.Waiting(last))
	r.Slot(last)[3] ^= 1 // torn
	require.False(t, r.Poll(10, e, 0))

	put(last, 0)
	require.True(t, r.Poll(10, e, 0))
	require.Zero(t, r.Pending(), "the last cell's token settles those before it on the path")
	require.False(t, r.Waiting(last), "and its slot is zeroed")
	require.Equal(t, uint64(1), e.Stats().TokensAccepted)

	r.Posted(last + 1)
	put(last+1, 0)
	r.Forget()
	require.Zero(t, r.Pending())
	require.Equal(t, make([]byte, len(buf)), buf, "a forgotten ring is clear for the next incarnation")
}

// A Path joins a reset under way and never resets a closed path; its
// quiet and its end read the token ring a last time and clear it.
func TestPathResetContract(t *testing.T) {
	e, err := cell.New(cell.Config{Peer: "B", Paths: 2, Window: 4, RecvDepth: 2, CellSize: 4096, MTU: 4096})
	require.NoError(t, err)
	e.Ready()
	var p bind.Path
	p.Tokens.Init(make([]byte, 4*cell.TokenSize), 4, 2)
	require.NoError(t, e.Send(0, cell.SendRange{Tag: 1, Addr: 1 << 30, LKey: 1, Len: 4096}))
	e.Grant(0, cell.Grant{Seq: 0, Addr: 1 << 40, RKey: 2, Len: 4096})
	post := e.Ready().Posts[0]
	p.Tokens.Posted(post.Cell)

	require.NoError(t, e.PathFailed(1, post.Path, nil))
	require.True(t, p.StartReset())
	require.False(t, p.StartReset(), "a second Reset joins the first")
	require.True(t, p.Resetting())
	// The cell landed before its path went down; its token is read on
	// the way out, not lost with the ring.
	cell.PutToken(p.Tokens.Slot(post.Cell), cell.Token{ID: post.Cell, Path: post.Path})
	require.True(t, p.Quiet(2, e, post.Path))
	require.Equal(t, uint64(1), e.Stats().TokensAccepted)
	p.Back(3, e, post.Path)
	require.False(t, p.Resetting())
	require.Equal(t, cell.PathUp, e.Path(post.Path).State)
	require.Equal(t, uint64(1), p.Resets())

	p.Kill(4, e, post.Path, errors.New("gone"))
	require.True(t, p.Dead())
	require.False(t, p.StartReset(), "a closed path is not reset")
	require.Equal(t, cell.PathDead, e.Path(post.Path).State)
}
