package bench

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"github.com/rdmacell/rdmacell/comm"
)

// The paths report (--paths-report): at the end of a run every rank reads
// its communicator's Stats and rank 0 prints one table with a row per
// rank, peer, link and path. Rank 0 collects the rows rather than each
// rank printing its own: the launcher interleaves the lines of ranks that
// write at once, and one table sorted by rank reads at a glance. Each rank
// formats its own rows and sends them to rank 0 as text, on a tag of the
// communicator's point-to-point channel, which no collective uses.

// pathsTag is the tag the rows travel to rank 0 under.
const pathsTag = 0x70617468 // "path"

// pathsReport gathers every rank's rows on rank 0 and prints them.
func (b *bencher) pathsReport() error {
	var rows bytes.Buffer
	writePathRows(&rows, b.comm.Stats())
	if b.rank != 0 {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(rows.Len()))
		if err := b.comm.Send(b.ctx, 0, pathsTag, n[:]); err != nil {
			return fmt.Errorf("paths report: send to rank 0: %w", err)
		}
		if err := b.comm.Send(b.ctx, 0, pathsTag, rows.Bytes()); err != nil {
			return fmt.Errorf("paths report: send to rank 0: %w", err)
		}
		return nil
	}
	printPathsHeader(b.out)
	b.out.Write(rows.Bytes())
	for r := 1; r < b.n; r++ {
		var n [8]byte
		if _, err := b.comm.Recv(b.ctx, r, pathsTag, n[:]); err != nil {
			return fmt.Errorf("paths report: rows of rank %d: %w", r, err)
		}
		buf := make([]byte, binary.LittleEndian.Uint64(n[:]))
		if _, err := b.comm.Recv(b.ctx, r, pathsTag, buf); err != nil {
			return fmt.Errorf("paths report: rows of rank %d: %w", r, err)
		}
		b.out.Write(buf)
	}
	fmt.Fprintln(b.out, "#")
	return nil
}

func printPathsHeader(w io.Writer) {
	fmt.Fprintln(w, "# Paths: cells and bytes posted, RTT (- before a sample), T_soft and the late margin (- before the path's tokens are timed) now, demotions (soft timeouts), promotions, re-probes (stale measurements forgotten), give-ups and resets")
	fmt.Fprintf(w, "#%5s  %4s  %9s  %7s  %4s  %9s  %10s  %14s  %9s  %9s  %9s  %8s  %8s  %8s  %8s  %6s\n",
		"rank", "peer", "transport", "link", "path", "state", "cells", "bytes", "rtt(us)", "tsoft(us)", "late(us)", "demoted", "promoted", "reprobed", "give-ups", "resets")
}

// writePathRows writes a row for every path of every connected peer in s,
// or a line saying there is none.
func writePathRows(w io.Writer, s comm.Stats) {
	rows := 0
	for _, p := range s.Peers {
		for _, l := range p.Links {
			for _, q := range l.Paths {
				fmt.Fprintf(w, "%6d  %4d  %9s  %7s  %4d  %9s  %10d  %14d  %9s  %9s  %9s  %8d  %8d  %8d  %8d  %6d\n",
					s.Rank, p.Rank, p.Transport, l.Name, q.Index, q.State, q.CellsPosted, q.BytesPosted,
					rtt(q), micros(q.SoftTimeout), lateMargin(q), q.SoftTimeouts, q.Promotions, q.Reprobes, q.GiveUps, q.Resets)
				rows++
			}
		}
	}
	if rows == 0 {
		fmt.Fprintf(w, "# rank %d connected to no peer\n", s.Rank)
	}
}

// rtt is the path's smoothed RTT, "-" before its first sample: until
// then it is only the configured initial RTT.
func rtt(q comm.PathStats) string {
	if q.Samples == 0 {
		return "-"
	}
	return micros(q.SRTT)
}

// lateMargin is how late past its expected time the path's head copy
// may be before it is demoted, "-" until the path's tokens have been
// timed (the head copy's clock is then T_soft).
func lateMargin(q comm.PathStats) string {
	if q.LateMargin == 0 {
		return "-"
	}
	return micros(q.LateMargin)
}

func micros(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Microsecond)) }
