package fault

import (
	"strconv"
	"time"
)

// Kind is a kind of fault; see the package documentation.
type Kind uint8

const (
	// None passes requests through.
	None Kind = iota
	// Delay hands each send request to the provider Delay after it was
	// posted, in order.
	Delay
	// Stall holds send requests until the fault is changed.
	Stall
	// Drop makes send requests vanish and then breaks the QP.
	Drop
	// Kill moves the QP to StateErr.
	Kill
)

var kindNames = [...]string{"none", "delay", "stall", "drop", "kill"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Fault is what a QP does to the send requests posted on it.
type Fault struct {
	Kind Kind
	// Delay is how long a Delay fault holds each request.
	Delay time.Duration
	// After is how many more send requests pass through untouched before
	// the fault applies.
	After int
}

// Stats counts what a QP did with its send requests.
type Stats struct {
	// Requests and Bytes count the send requests handed to the provider's
	// QP and their payload.
	Requests, Bytes uint64
	// Held is the number of requests the wrapper holds now.
	Held int
	// Late counts requests delivered by a Modify to StateErr or
	// StateReset: the late copies of a given-up QP.
	Late uint64
	// Dropped counts requests a Drop fault made vanish.
	Dropped uint64
}
