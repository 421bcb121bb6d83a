package ibv

import (
	"fmt"
	"time"

	"github.com/rdmacell/rdmacell/verbs"
)

// Defaults of verbs.QPConfig, as the model documents them.
const (
	defaultQueueDepth = 1024
	defaultMaxSGE     = 4
	defaultTimeout    = time.Second
	defaultMinRNR     = time.Millisecond
	// maxRetry is the largest retry or RNR retry count: ibverbs carries
	// both in 3-bit fields, and an RNR retry of 7 means forever.
	maxRetry = 7
)

// deviceLimits are the bounds of the device a QP is created on
// (ibv_query_device: max_qp_wr, max_sge).
type deviceLimits struct {
	maxQPWR, maxSGE int
}

// qpParams is a verbs.QPConfig with defaults applied, checked against the
// device, and encoded the way ibv_modify_qp wants it.
type qpParams struct {
	maxSendWR, maxRecvWR, maxSGE int
	timeout                      uint8 // local ACK timeout exponent
	retry, rnrRetry              uint8
	minRNR                       uint8 // RNR NAK timer code
	flowLabel                    uint32
}

// qpParamsOf checks cfg against lim and encodes it. Values the hardware
// cannot express are ErrInvalidArgument rather than silently clamped: a
// retry count of 10 that became 7 would change how fast a path is given
// up.
func qpParamsOf(cfg *verbs.QPConfig, lim deviceLimits) (qpParams, error) {
	p := qpParams{
		maxSendWR: cfg.MaxSendWR,
		maxRecvWR: cfg.MaxRecvWR,
		maxSGE:    cfg.MaxSGE,
	}
	if p.maxSendWR == 0 {
		p.maxSendWR = defaultQueueDepth
	}
	if p.maxRecvWR == 0 {
		p.maxRecvWR = defaultQueueDepth
	}
	if p.maxSGE == 0 {
		p.maxSGE = defaultMaxSGE
	}
	// One send slot stays in reserve for the marker Close posts (see
	// QP.Close), hence maxQPWR-1.
	switch {
	case p.maxSendWR < 0 || p.maxSendWR > lim.maxQPWR-1:
		return p, fmt.Errorf("%w: MaxSendWR %d, want 1..%d on this device", verbs.ErrInvalidArgument, p.maxSendWR, lim.maxQPWR-1)
	case p.maxRecvWR < 0 || p.maxRecvWR > lim.maxQPWR:
		return p, fmt.Errorf("%w: MaxRecvWR %d, want 1..%d on this device", verbs.ErrInvalidArgument, p.maxRecvWR, lim.maxQPWR)
	case p.maxSGE < 0 || p.maxSGE > lim.maxSGE:
		return p, fmt.Errorf("%w: MaxSGE %d, want 1..%d on this device", verbs.ErrInvalidArgument, p.maxSGE, lim.maxSGE)
	case cfg.RetryCount < 0 || cfg.RetryCount > maxRetry:
		return p, fmt.Errorf("%w: RetryCount %d, want 0..%d (a 3-bit field in ibverbs)", verbs.ErrInvalidArgument, cfg.RetryCount, maxRetry)
	case cfg.RNRRetry < 0 || cfg.RNRRetry > maxRetry:
		return p, fmt.Errorf("%w: RNRRetry %d, want 0..%d (7 retries forever)", verbs.ErrInvalidArgument, cfg.RNRRetry, maxRetry)
	case cfg.FlowLabel > flowLabelMask:
		return p, fmt.Errorf("%w: FlowLabel %#x, want at most 20 bits (%#x)", verbs.ErrInvalidArgument, cfg.FlowLabel, flowLabelMask)
	}
	p.retry, p.rnrRetry, p.flowLabel = uint8(cfg.RetryCount), uint8(cfg.RNRRetry), cfg.FlowLabel
	var err error
	if p.timeout, err = ackTimeoutCode(cfg.Timeout); err != nil {
		return p, err
	}
	if p.minRNR, err = rnrTimerCode(cfg.MinRNRTimer); err != nil {
		return p, err
	}
	return p, nil
}

// ackTimeoutUnit is the unit of the local ACK timeout: the QP waits
// ackTimeoutUnit × 2^code for an acknowledgement before it retries.
const ackTimeoutUnit = 4096 * time.Nanosecond

// maxAckTimeoutCode is the largest code of the 5-bit field; 0 would mean
// "wait forever", which the model does not offer.
const maxAckTimeoutCode = 31

// ackTimeoutCode encodes d (zero for the default) as the smallest local
// ACK timeout code whose wait is at least d, so a QP never gives up
// sooner than asked.
func ackTimeoutCode(d time.Duration) (uint8, error) {
	if d == 0 {
		d = defaultTimeout
	}
	if d < 0 || d > ackTimeoutUnit<<maxAckTimeoutCode {
		return 0, fmt.Errorf("%w: Timeout %v, want 0 < Timeout <= %v", verbs.ErrInvalidArgument, d, ackTimeoutUnit<<maxAckTimeoutCode)
	}
	code := uint8(1)
	for ackTimeoutUnit<<code < d {
		code++
	}
	return code, nil
}

// rnrTimerSteps are the delays of the RNR NAK timer codes 1..31 of the
// InfiniBand specification; code 0 is the longest, rnrTimerCode0.
var rnrTimerSteps = [...]time.Duration{
	0, // code 0, see rnrTimerCode0
	10 * time.Microsecond, 20 * time.Microsecond, 30 * time.Microsecond,
	40 * time.Microsecond, 60 * time.Microsecond, 80 * time.Microsecond,
	120 * time.Microsecond, 160 * time.Microsecond, 240 * time.Microsecond,
	320 * time.Microsecond, 480 * time.Microsecond, 640 * time.Microsecond,
	960 * time.Microsecond, 1280 * time.Microsecond, 1920 * time.Microsecond,
	2560 * time.Microsecond, 3840 * time.Microsecond, 5120 * time.Microsecond,
	7680 * time.Microsecond, 10240 * time.Microsecond, 15360 * time.Microsecond,
	20480 * time.Microsecond, 30720 * time.Microsecond, 40960 * time.Microsecond,
	61440 * time.Microsecond, 81920 * time.Microsecond, 122880 * time.Microsecond,
	163840 * time.Microsecond, 245760 * time.Microsecond, 327680 * time.Microsecond,
	491520 * time.Microsecond,
}

// rnrTimerCode0 is the delay of RNR timer code 0, the longest.
const rnrTimerCode0 = 655360 * time.Microsecond

// rnrTimerCode encodes d (zero for the default) as the smallest RNR timer
// code whose delay is at least d.
func rnrTimerCode(d time.Duration) (uint8, error) {
	if d == 0 {
		d = defaultMinRNR
	}
	if d < 0 || d > rnrTimerCode0 {
		return 0, fmt.Errorf("%w: MinRNRTimer %v, want 0 < MinRNRTimer <= %v", verbs.ErrInvalidArgument, d, rnrTimerCode0)
	}
	for code := 1; code < len(rnrTimerSteps); code++ {
		if rnrTimerSteps[code] >= d {
			return uint8(code), nil
		}
	}
	return 0, nil
}

// mtuEnum translates an MTU in bytes into enum ibv_mtu.
func mtuEnum(bytes int) (int, bool) {
	switch bytes {
	case 256:
		return mtu256, true
	case 512:
		return mtu512, true
	case 1024:
		return mtu1024, true
	case 2048:
		return mtu2048, true
	case 4096:
		return mtu4096, true
	}
	return 0, false
}

// mtuBytes translates enum ibv_mtu into bytes; zero for an unknown value.
func mtuBytes(e int) int {
	if e < mtu256 || e > mtu4096 {
		return 0
	}
	return 128 << e
}
