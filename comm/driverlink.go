package comm

import (
	"github.com/rdmacell/rdmacell/cell/driver"
)

// driverLink binds a link to a cell connection.
type driverLink struct {
	c *driver.Conn
}

func (l driverLink) sendAt(addr uint64, lkey uint32, n int64) (op, error) {
	o, err := l.c.SendAt(addr, lkey, n)
	if err != nil {
		return nil, err
	}
	return o, nil
}

func (l driverLink) recvAt(addr uint64, rkey uint32, n int64) (op, error) {
	o, err := l.c.RecvAt(addr, rkey, n)
	if err != nil {
		return nil, err
	}
	return o, nil
}

func (l driverLink) abort(err error) { l.c.Abort(err) }

func (l driverLink) close() error { return l.c.Close() }

func (l driverLink) err() error { return l.c.Err() }

func (l driverLink) progress() linkProgress {
	st := l.c.Stats()
	return linkProgress{Parked: st.Parked, Parks: st.Parks, Keepalives: st.Keepalives}
}
