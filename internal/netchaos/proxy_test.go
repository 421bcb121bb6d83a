package netchaos

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// echo serves one connection at a time, writing back what it reads.
func echo(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				_, _ = io.Copy(c, c)
				_ = c.Close()
			}()
		}
	}()
	return ln.Addr().String()
}

func dialProxy(t *testing.T) (*Proxy, net.Conn) {
	p, err := Listen()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	p.Forward(echo(t))
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	return p, c
}

// link waits for the proxy's one link.
func link(t *testing.T, p *Proxy) *Link {
	for range 1000 {
		if ls := p.Links(); len(ls) == 1 {
			return ls[0]
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("the proxy has no link")
	return nil
}

// echoed writes b through c and reads back as many bytes.
func echoed(t *testing.T, c net.Conn, b []byte) []byte {
	t.Helper()
	_, err := c.Write(b)
	require.NoError(t, err)
	got := make([]byte, len(b))
	_, err = io.ReadFull(c, got)
	require.NoError(t, err)
	return got
}

func TestForwardsAndKeepsTheHead(t *testing.T) {
	p, c := dialProxy(t)
	msg := []byte("hello through the proxy, more than a few bytes long, so that the head is cut at sixty-four")
	require.Equal(t, msg, echoed(t, c, msg))
	require.Equal(t, msg[:headLen], link(t, p).Head())
}

// Held bytes are delivered once the hold ends, in order and whole.
func TestHoldDelaysDelivery(t *testing.T) {
	p, c := dialProxy(t)
	echoed(t, c, []byte{1})
	const hold = 200 * time.Millisecond
	link(t, p).Hold(0, hold)
	start := time.Now()
	require.Equal(t, []byte{2, 3}, echoed(t, c, []byte{2, 3}))
	require.GreaterOrEqual(t, time.Since(start), hold, "nothing came back before the hold ended")
}

func TestCutResetsBothEnds(t *testing.T) {
	p, c := dialProxy(t)
	echoed(t, c, []byte{1})
	link(t, p).Cut()
	_, err := c.Read(make([]byte, 1))
	require.Error(t, err, "a cut link ends the connection")
	require.NotErrorIs(t, err, io.EOF, "abortively, not with an orderly close")
}
