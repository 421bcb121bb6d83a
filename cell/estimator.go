package cell

// estimator keeps one path's RTT, soft timeout and bandwidth estimates.
// All times are nanoseconds of the sender's clock.
type estimator struct {
	srtt, rttvar int64
	// minRTT is the smallest sample, minN the size of the cell it timed:
	// its transmission is part of it and must not count as delay, or a
	// cell's size would feed its own BDP and grow without bound.
	minRTT, minN int64
	bw           int64 // bytes per second, 0 until measured
	// delay smooths the samples less their queueing: the time the bytes
	// posted before the cell took to drain at the measured rate.
	delay   int64
	samples int
	floor   int64
	// late smooths how much later than expected (expect) a token came,
	// lateVar its mean deviation: the margin of a head copy's deadline.
	late, lateVar int64
	lateN         int
}

func (e *estimator) init(initialRTT, floor int64) {
	*e = estimator{srtt: initialRTT, rttvar: initialRTT / 2, floor: floor}
}

// forget drops what placement ranks by (delay, rate, minimum, samples)
// but keeps the smoothed RTT, its variance and the lateness, by which
// the next cell's timeouts are judged until a sample replaces them.
func (e *estimator) forget() {
	e.samples, e.bw, e.delay, e.minRTT, e.minN = 0, 0, 0, 0, 0
}

// sample folds in one RTT as RFC 6298 does (α = 1/8, β = 1/4), the
// variance first, against the average before this sample.
func (e *estimator) sample(rtt int64) {
	if rtt < 0 {
		rtt = 0
	}
	smooth(&e.srtt, &e.rttvar, rtt, e.samples == 0)
	e.samples++
}

// smooth folds x into the average avg and its mean deviation dev as RFC
// 6298 does (α = 1/8, β = 1/4), the deviation first, against the average
// before x; the first x sets them.
func smooth(avg, dev *int64, x int64, first bool) {
	if first {
		*avg, *dev = x, max(x, -x)/2
		return
	}
	d := x - *avg
	*dev += (max(d, -d) - *dev) / 4
	*avg += (x - *avg) / 8
}

// rate folds in n bytes delivered over interval ns, with weight 1/4.
func (e *estimator) rate(n, interval int64) {
	if interval <= 0 || n <= 0 {
		return
	}
	s := int64(float64(n) * 1e9 / float64(interval))
	if s < 1 {
		s = 1
	}
	if e.bw == 0 {
		e.bw = s
	} else {
		e.bw += (s - e.bw) / 4
	}
}

// sampleDelay folds in one RTT less the queueing of its cell, behind
// ahead bytes, with the weight of the smoothed RTT. It comes after sample
// and rate, which count the same sample.
func (e *estimator) sampleDelay(rtt, ahead int64) {
	d := rtt
	if e.bw > 0 {
		d -= int64(float64(ahead) * 1e9 / float64(e.bw))
	}
	d = max(d, 0)
	if e.samples <= 1 {
		e.delay = d
		return
	}
	e.delay += (d - e.delay) / 8
}

// minimum records the sample of an n-byte cell if it is the smallest.
func (e *estimator) minimum(rtt, n int64) {
	if e.minN == 0 || rtt < e.minRTT {
		e.minRTT, e.minN = rtt, max(n, 1)
	}
}

// expect is when the token of a copy sent at sentAt should come, given
// that the path's previous token came at progress and that n bytes were
// posted on it since, of which this copy's are the last: after the
// path's delay, or after those bytes drain at its rate behind the
// previous token, whichever is later. It is 0 while the path has no
// delay and rate measured.
func (e *estimator) expect(sentAt, progress, n int64) int64 {
	if e.bw == 0 || e.samples < 2 {
		return 0
	}
	return max(sentAt+e.delay, progress+int64(float64(n)*1e9/float64(e.bw)))
}

// sampleLate folds in a token that came at now for a copy expected at
// at (see expect), with the weights of the RTT and its variance. It
// comes before sample and rate, so that the expectation is the one the
// deadline used.
func (e *estimator) sampleLate(now, at int64) {
	if at == 0 {
		return
	}
	smooth(&e.late, &e.lateVar, now-at, e.lateN == 0)
	e.lateN++
}

// lateMargin is how long after its expected time a head copy may wait
// for its token before it is late: the usual lateness plus four times
// its deviation, at least the floor. It is 0 until a token was compared
// with its expectation.
func (e *estimator) lateMargin() int64 {
	if e.lateN == 0 {
		return 0
	}
	return max(e.late+4*e.lateVar, e.floor, 1)
}

// softTimeout is T_soft = RTT_avg + 4·RTT_var, at least the floor.
func (e *estimator) softTimeout() int64 { return max(e.srtt+4*e.rttvar, e.floor) }

// bdp is the bandwidth-delay product in bytes, 0 if unmeasured: what the
// path holds in flight at its best RTT, less the cell that RTT timed.
func (e *estimator) bdp() int64 {
	if e.bw == 0 || e.minN == 0 {
		return 0
	}
	return max(e.bw/1000*e.minRTT/1e6-e.minN, 0)
}
