package netlab

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// The labs this process has up, for HandleSignals, and every tag it drew.
var (
	liveMu sync.Mutex
	live   = map[*Lab]struct{}{}
	tags   = map[string]bool{}
)

// register records l as up and gives it a tag that no other lab of this
// process has had: one taken down only in part must not lend its name to
// the next.
func register(l *Lab) {
	liveMu.Lock()
	defer liveMu.Unlock()
	for l.id.tag == "" || tags[l.id.tag] {
		l.id.tag = newTag()
	}
	tags[l.id.tag] = true
	live[l] = struct{}{}
}

func unregister(l *Lab) {
	liveMu.Lock()
	delete(live, l)
	liveMu.Unlock()
}

// signalCleanupTimeout bounds the removal of the labs on a signal.
const signalCleanupTimeout = time.Minute

// HandleSignals makes SIGINT and SIGTERM take down every lab this process
// brought up (with Up) and then end the process with status 128+signal,
// as the signal would have. It returns a function that stops handling
// them.
func HandleSignals() (stop func()) {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
			return
		case sig := <-ch:
			fmt.Fprintf(os.Stderr, "netlab: %v: taking the labs down\n", sig)
			DownAll()
			code := 1
			if s, ok := sig.(syscall.Signal); ok {
				code = 128 + int(s)
			}
			os.Exit(code)
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			signal.Stop(ch)
			close(done)
		})
	}
}

// DownAll takes down every lab this process brought up and has not taken
// down yet, and reports on standard error what it could not remove.
func DownAll() {
	liveMu.Lock()
	labs := make([]*Lab, 0, len(live))
	for l := range live {
		labs = append(labs, l)
	}
	liveMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), signalCleanupTimeout)
	defer cancel()
	for _, l := range labs {
		if err := l.Down(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "netlab: take lab %s down: %v\n", l.id, err)
		}
	}
}
