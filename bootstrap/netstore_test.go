package bootstrap

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A client that does not know the job secret gets nothing from a served
// store but the server's nonce, and a server that does not know it is
// not trusted by the client.
func TestStoreServerAuth(t *testing.T) {
	srv := startStoreServer(t)
	ctx := testContext(t)
	addr := srv.Addr().String()

	good, err := DialStore(ctx, addr, testStoreSecret)
	require.NoError(t, err)
	defer good.Close()
	require.NoError(t, good.Put(ctx, "/job/p2p/1/0/qp", []byte("connection info"), NoLease))

	wrong := bytes.Repeat([]byte{7}, SecretSize)
	_, err = DialStore(ctx, addr, wrong)
	require.ErrorIs(t, err, ErrStoreAuth)
	assert.ErrorContains(t, err, addr)

	// By hand: read the hello, answer with a wrong MAC, and read on.
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	require.NoError(t, nc.SetDeadline(time.Now().Add(testTimeout)))
	hello := make([]byte, len(storeMagic)+storeNonceSize)
	_, err = io.ReadFull(nc, hello)
	require.NoError(t, err)
	assert.Equal(t, storeMagic, string(hello[:len(storeMagic)]))
	msg := append([]byte(storeMagic), make([]byte, storeNonceSize+storeMACSize)...)
	_, err = nc.Write(msg)
	require.NoError(t, err)
	rest, err := io.ReadAll(nc)
	require.NoError(t, err, "the server should close the connection")
	assert.Empty(t, rest, "an unauthenticated client was sent something")

	// Something that is not our server, or is one of another job.
	other := serveOther(t, wrong)
	_, err = DialStore(ctx, other, testStoreSecret)
	require.ErrorIs(t, err, ErrStoreAuth)
	echo := listenRaw(t, func(c net.Conn) {
		_, _ = c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n" + string(make([]byte, 64))))
	})
	_, err = DialStore(ctx, echo, testStoreSecret)
	require.ErrorIs(t, err, ErrStoreAuth)
	assert.ErrorContains(t, err, "not an RDMACell store")

	// The good client was not disturbed.
	kvs, _, err := good.List(ctx, "/job/")
	require.NoError(t, err)
	require.Len(t, kvs, 1)
}

// serveOther serves a store with another secret.
func serveOther(t *testing.T, secret []byte) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv, err := ServeStore(ln, secret, quietLogger())
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close(context.Background()) })
	return ln.Addr().String()
}

// listenRaw accepts connections and hands each to fn, then closes it.
func listenRaw(t *testing.T, fn func(net.Conn)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fn(c)
			_ = c.Close()
		}
	}()
	return ln.Addr().String()
}

// An authenticated client that sends a malformed or mis-tagged frame is
// cut off; the server goes on serving the others.
func TestStoreServerMalformedFrame(t *testing.T) {
	srv := startStoreServer(t)
	ctx := testContext(t)
	key, err := storeAuthKey(testStoreSecret)
	require.NoError(t, err)
	bystander, err := DialStore(ctx, srv.Addr().String(), testStoreSecret)
	require.NoError(t, err)
	defer bystander.Close()

	cases := map[string]func(fr *framer) []byte{
		"unknown type": func(fr *framer) []byte { return tagged(fr, []byte{99, 0, 0, 0, 0, 0, 0, 0, 1}) },
		"a response":   func(fr *framer) []byte { return tagged(fr, appendFrameBody(nil, &frame{typ: respOK, id: 1})) },
		"trailing bytes": func(fr *framer) []byte {
			return tagged(fr, append(appendFrameBody(nil, &frame{typ: reqList, id: 1, key: "/"}), 0))
		},
		"key too long": func(fr *framer) []byte {
			return tagged(fr, appendFrameBody(nil, &frame{typ: reqList, id: 1, key: string(make([]byte, maxStoreKey+1))}))
		},
		"bad tag": func(fr *framer) []byte {
			b := tagged(fr, appendFrameBody(nil, &frame{typ: reqList, id: 1, key: "/"}))
			b[len(b)-1] ^= 1
			return b
		},
		"length over the bound": func(*framer) []byte { return binary.BigEndian.AppendUint32(nil, maxFrame+1) },
		"negative TTL": func(fr *framer) []byte {
			return tagged(fr, appendFrameBody(nil, &frame{typ: reqGrant, id: 1, num: -1}))
		},
	}
	for name, frameOf := range cases {
		t.Run(name, func(t *testing.T) {
			nc, err := net.Dial("tcp", srv.Addr().String())
			require.NoError(t, err)
			defer nc.Close()
			require.NoError(t, nc.SetDeadline(time.Now().Add(testTimeout)))
			fr, err := clientHandshake(nc, key)
			require.NoError(t, err)
			_, err = nc.Write(frameOf(fr))
			require.NoError(t, err)
			_, err = fr.readFrame()
			assert.ErrorIs(t, err, io.EOF, "the server answered a malformed frame instead of closing")
		})
	}
	require.NoError(t, bystander.Put(ctx, "/still", []byte("served"), NoLease))
	kvs, _, err := bystander.List(ctx, "/still")
	require.NoError(t, err)
	assert.Len(t, kvs, 1)
}

// tagged frames body as fr's next frame would be.
func tagged(fr *framer, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(body)+storeTagSize))
	b = append(b, body...)
	b = append(b, frameTag(fr.outKey, fr.outSeq, body)...)
	fr.outSeq++
	return b
}

// A client whose connection ends without a word (its process killed)
// loses its lease after the TTL, and the keys under it: that is how the
// others learn it died.
func TestStoreServerLeaseOfLostClient(t *testing.T) {
	srv := startStoreServer(t)
	ctx := testContext(t)
	watcher := srv.Store()
	_, rev, err := watcher.List(ctx, "/")
	require.NoError(t, err)
	events := watcher.Watch(ctx, "/live/", rev+1)

	s, err := DialStore(ctx, srv.Addr().String(), testStoreSecret)
	require.NoError(t, err)
	lease, ttl, err := s.Grant(ctx, testTTL)
	require.NoError(t, err)
	renewals, err := s.KeepAlive(ctx, lease)
	require.NoError(t, err)
	require.NoError(t, s.Put(ctx, "/live/1", []byte("x"), lease))
	select {
	case <-renewals:
	case <-ctx.Done():
		t.Fatal("no renewal")
	}
	ns := s.(*netStore)
	start := time.Now()
	_ = ns.nc.Close() // as the kernel does for a killed process
	ev := nextEvents(t, ctx, events)
	require.Len(t, ev, 1) // the put
	ev = nextEvents(t, ctx, events)
	require.Len(t, ev, 1)
	assert.True(t, ev[0].Deleted)
	t.Logf("lease of %v ended %v after the connection", ttl, time.Since(start).Round(time.Millisecond))
	// Renewals stop, and operations fail naming the store, after the loss.
	for range renewals {
	}
	err = s.Put(ctx, "/live/2", nil, NoLease)
	require.Error(t, err)
	assert.ErrorContains(t, err, srv.Addr().String())
	require.NoError(t, s.Close())
}

// The serving rank's Close waits for the others to leave the store, but
// not for one that stopped renewing.
func TestStoreServerCloseWaitsForClients(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv, err := ServeStore(ln, testStoreSecret, quietLogger())
	require.NoError(t, err)
	ctx := testContext(t)
	s, err := DialStore(ctx, ln.Addr().String(), testStoreSecret)
	require.NoError(t, err)
	lease, _, err := s.Grant(ctx, testTTL)
	require.NoError(t, err)
	kctx, stop := context.WithCancel(ctx)
	_, err = s.KeepAlive(kctx, lease)
	require.NoError(t, err)

	closed := make(chan error, 1)
	go func() { closed <- srv.Close(ctx) }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a client was still in the store", err)
	case <-time.After(2 * testTTL):
	}
	require.NoError(t, s.Put(ctx, "/still/served", nil, lease), "the store went away under a live client")
	stop() // the client stops renewing: its lease ends, and so does Close
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("Close did not return after the last lease ended")
	}
	_ = s.Close()
}

// A watch delivers every change in revision order, in several frames when
// one would be too large, while requests of the same connection are
// answered.
func TestStoreServerLargeWatch(t *testing.T) {
	srv := startStoreServer(t)
	ctx := testContext(t)
	s, err := DialStore(ctx, srv.Addr().String(), testStoreSecret)
	require.NoError(t, err)
	defer s.Close()
	_, rev, err := s.List(ctx, "/")
	require.NoError(t, err)
	big := make([]byte, maxStoreValue)
	const n = 6 // 24 MiB: more than one frame
	for i := range n {
		require.NoError(t, srv.Store().Put(ctx, "/big/"+string(rune('a'+i)), big, NoLease))
	}
	watch := s.Watch(ctx, "/big/", rev+1)
	var seen []Event
	for len(seen) < n {
		seen = append(seen, nextEvents(t, ctx, watch)...)
	}
	for i, ev := range seen {
		assert.Equal(t, "/big/"+string(rune('a'+i)), ev.KV.Key)
		assert.Len(t, ev.KV.Value, maxStoreValue)
		if i > 0 {
			assert.Greater(t, ev.KV.Revision, seen[i-1].KV.Revision)
		}
	}
	_, _, err = s.List(ctx, "/big/")
	require.ErrorContains(t, err, "frame bound", "a listing too large for a frame is an error, not a broken connection")
	require.NoError(t, s.Put(ctx, "/after", nil, NoLease))
}

// FuzzStoreFrame feeds arbitrary frame bodies, correctly tagged, to both
// sides' decoders: none may panic, and a body that decodes encodes back to
// the same bytes. Arbitrary bytes in place of a whole frame must fail
// cleanly too.
func FuzzStoreFrame(f *testing.F) {
	for _, fr := range []frame{
		{typ: reqGrant, id: 1, num: int64(time.Second)},
		{typ: reqPut, id: 2, key: "/a", value: []byte("v"), lease: 3},
		{typ: reqWatch, id: 3, key: "/", num: 7},
		{typ: respList, id: 4, num: 9, kvs: []KeyValue{{Key: "/a", Value: []byte("x"), Revision: 2}}},
		{typ: respWatch, id: 5, events: []Event{{Deleted: true, KV: KeyValue{Key: "/b", Revision: 3}}}},
		{typ: respError, id: 6, code: codeNoLease, text: "gone"},
	} {
		f.Add(appendFrameBody(nil, &fr))
	}
	key := bytes.Repeat([]byte{1}, 32)
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, request := range []bool{true, false} {
			fr, err := decodeFrameBody(body, request)
			if err != nil {
				if !errors.Is(err, errMalformed) {
					t.Fatalf("error %v does not wrap errMalformed", err)
				}
				continue
			}
			if again := appendFrameBody(nil, &fr); !bytes.Equal(again, body) {
				t.Fatalf("decoded %+v re-encodes as %x, not %x", fr, again, body)
			}
		}
		// Through the framer: tagged, and raw.
		var wire bytes.Buffer
		w := &framer{w: &wire, outKey: key}
		b := binary.BigEndian.AppendUint32(nil, uint32(len(body)+storeTagSize))
		b = append(b, body...)
		wire.Write(append(b, frameTag(w.outKey, 0, body)...))
		wire.Write(body)
		r := &framer{r: bufio.NewReader(&wire), inKey: key, request: true}
		for range 2 {
			if _, err := r.readFrame(); err != nil && !errors.Is(err, errMalformed) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("readFrame: %v", err)
			}
		}
	})
}

// A listener that closes every connection before the hello (a server
// refusing for want of room, or still starting) is tried again until the
// caller gives up, then reported unreachable, naming the address.
func TestDialStoreRetriesSilentServer(t *testing.T) {
	addr := listenRaw(t, func(net.Conn) {})
	ctx, cancel := context.WithTimeout(testContext(t), time.Second)
	defer cancel()
	_, err := DialStore(ctx, addr, testStoreSecret)
	require.ErrorIs(t, err, ErrUnreachable)
	require.NotErrorIs(t, err, ErrStoreAuth)
	assert.ErrorContains(t, err, addr)
	assert.Regexp(t, `after [2-9]\d* attempts`, err.Error(), "it was not tried again")
}
