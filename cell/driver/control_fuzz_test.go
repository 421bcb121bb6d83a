package driver

import (
	"testing"

	"github.com/rdmacell/rdmacell/verbs"
)

// The peer's control messages are decoded from whatever lands in the
// receive buffers: any bytes either fail to decode or decode to a message
// that names an existing path or lane and encodes back to the same
// fields.
func FuzzDecodeCtl(f *testing.F) {
	const paths = 4
	ep := verbs.Endpoint{Provider: "tcp", Addr: "127.0.0.1:1", QPN: 7}
	for _, m := range []ctlMsg{
		{kind: msgEP, seq: 1, ack: 2, path: 3, gen: 4, ep: ep},
		{kind: msgRTS, path: 1, gen: 9},
		{kind: msgLaneEP, path: 1, gen: 2, ep: ep},
		{kind: msgLaneRTS, path: 0, gen: 1, seq: 1 << 31},
		{kind: msgBye},
		{kind: msgBell, ack: 5},
	} {
		b := make([]byte, ctlMsgSize)
		n, err := m.encode(b)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[:n])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeCtl(b, paths, "tcp")
		if err != nil {
			return
		}
		switch m.kind {
		case msgLaneEP, msgLaneRTS:
			if m.path >= laneCount(paths) {
				t.Fatalf("lane %d of %d accepted", m.path, laneCount(paths))
			}
		case msgEP, msgRTS, msgDead:
			if m.path >= paths {
				t.Fatalf("path %d of %d accepted", m.path, paths)
			}
		}
		out := make([]byte, ctlMsgSize)
		n, err := m.encode(out)
		if err != nil {
			t.Fatalf("a decoded message does not encode: %v", err)
		}
		again, err := decodeCtl(out[:n], paths, "tcp")
		if err != nil {
			t.Fatalf("re-encoded message does not decode: %v", err)
		}
		if again.kind != m.kind || again.path != m.path || again.gen != m.gen || again.seq != m.seq || again.ack != m.ack || again.ep != m.ep {
			t.Fatalf("round trip changed %+v into %+v", m, again)
		}
	})
}
