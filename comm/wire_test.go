package comm

import (
	"bytes"
	"testing"
)

// FuzzSlot feeds the control-slot decoder what a peer could write into a
// slot: it returns an error or messages, never panics, and a slot the
// writer packed reads back as written.
func FuzzSlot(f *testing.F) {
	msgs := []struct {
		h       header
		payload []byte
	}{
		{header{kind: kindHello, tag: protocolVersion, id: 1, length: 4}, []byte("job")},
		{header{kind: kindEager, chKind: chanUser, tag: 7, id: 2, length: 5}, []byte("hello")},
		{header{kind: kindRTS, chKind: chanOrdered, tag: 9, id: 3, length: 1 << 20}, nil},
		{header{kind: kindCTS, id: 3, off: 4096, length: 4096}, nil},
		{header{kind: kindNack, id: 4, reason: reasonGone}, nil},
		{header{kind: kindSetup}, []byte(`{"version":1}`)},
		{header{kind: kindSetup, aux: setupConnected}, nil},
		{header{kind: kindAbort, aux: 1}, []byte("cause")},
		{header{kind: kindBye}, nil},
	}
	slot := make([]byte, slotSize)
	var w slotWriter
	w.reset(slot)
	for _, m := range msgs {
		h := m.h
		w.add(&h, m.payload)
	}
	n := w.finish(5, 3)
	f.Add(append([]byte(nil), slot[slotHeaderSize:n]...), uint32(len(msgs)), uint32(3))
	f.Add([]byte{}, uint32(0), uint32(0))
	// The input is a slot's messages: the slot header and its checksum are
	// made valid here, so that the fuzzer reaches the messages' decoder.
	f.Fuzz(func(t *testing.T, body []byte, count, credits uint32) {
		if len(body) > slotSize-slotHeaderSize {
			return
		}
		b := make([]byte, slotHeaderSize+len(body))
		copy(b[slotHeaderSize:], body)
		var w slotWriter
		w.reset(b)
		w.n, w.count = len(b), int(count)
		w.finish(1, credits)
		var r slotReader
		if err := r.open(b, 1); err != nil {
			return
		}
		var h header
		for range len(b) {
			payload, ok, err := r.next(&h)
			if err != nil || !ok {
				return
			}
			if len(payload) != int(h.plen) {
				t.Fatalf("%v message: payload of %d bytes, header says %d", h.kind, len(payload), h.plen)
			}
		}
		t.Fatal("a slot held more messages than bytes")
	})
}

// TestSlotRoundTrip packs every kind of message into a slot and reads
// them back.
func TestSlotRoundTrip(t *testing.T) {
	slot := make([]byte, slotSize)
	var w slotWriter
	w.reset(slot)
	in := []header{
		{kind: kindEager, chKind: chanInternal, tag: 1, id: 1, length: 3},
		{kind: kindSetup},
	}
	payloads := [][]byte{[]byte("abc"), bytes.Repeat([]byte{'s'}, 700)}
	for i := range in {
		w.add(&in[i], payloads[i])
	}
	n := w.finish(9, 2)
	var r slotReader
	if err := r.open(slot[:n], 9); err != nil {
		t.Fatal(err)
	}
	for i := range in {
		var h header
		payload, ok, err := r.next(&h)
		if err != nil || !ok {
			t.Fatalf("message %d: ok %v, err %v", i, ok, err)
		}
		if h != in[i] || !bytes.Equal(payload, payloads[i]) {
			t.Fatalf("message %d: got %+v %q, want %+v %q", i, h, payload, in[i], payloads[i])
		}
	}
	if _, ok, err := r.next(new(header)); ok || err != nil {
		t.Fatalf("after the last message: ok %v, err %v", ok, err)
	}
}

// A setup message of a phase past the confirmation, or a confirmation
// carrying bytes, is refused as a malformed header.
func TestSetupPhaseChecked(t *testing.T) {
	for _, h := range []header{
		{kind: kindSetup, aux: setupConnected + 1},
		{kind: kindSetup, aux: setupConnected, plen: 3},
	} {
		if err := h.check(); err == nil {
			t.Errorf("%+v: accepted", h)
		}
	}
	for _, h := range []header{{kind: kindSetup, plen: 700}, {kind: kindSetup, aux: setupConnected}} {
		if err := h.check(); err != nil {
			t.Errorf("%+v: %v", h, err)
		}
	}
}
