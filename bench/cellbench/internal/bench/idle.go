package bench

import (
	"fmt"
	"syscall"
	"time"
)

// measureIdle reports the CPU a communicator burns while nothing is
// issued: its progress engine should park, not spin.
func (b *bencher) measureIdle(d time.Duration) error {
	before, err := cpuTime()
	if err != nil {
		return err
	}
	time.Sleep(d)
	after, err := cpuTime()
	if err != nil {
		return err
	}
	share := (after - before).Seconds() / d.Seconds()
	b.f64[0] = share
	if err := b.collMax(); err != nil {
		return fmt.Errorf("maximum of the idle CPU: %w", err)
	}
	if b.out != nil {
		fmt.Fprintf(b.out, "# Idle CPU per rank    : %.2f%% of a core over %v (maximum over ranks)\n", 100*b.f64[0], d)
	}
	return nil
}

// cpuTime is the user and system CPU time this process has used.
func cpuTime() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
