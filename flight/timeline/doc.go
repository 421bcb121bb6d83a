// Package timeline merges the flight-recorder dumps of a job's ranks
// (package flight) into one timeline: a trace that Perfetto and
// chrome://tracing open, and a picture the project draws itself, so that
// a person sees which rank was late, which operation failed or hung, and
// which path carried what.
//
// # The files
//
// Each rank writes its dump to rank-N.json in the job's trace directory
// (flight.Dump.WriteFile). MergeDir reads them all and writes beside them
//
//   - timeline.json (Merge), in Chrome's trace-event format;
//   - timeline.svg (RenderSVG), the picture.
//
// Both are replaced at once, through a temporary file and a rename, so
// that MergeDir can run again after every dump of a running job.
//
// # Opening the trace
//
// In Perfetto, open https://ui.perfetto.dev, choose "Open trace file" and
// pick timeline.json; in Chrome, open chrome://tracing and "Load" it.
// Each rank is a process, "rank N (host, pid P)" (its trace pid is N+1,
// since the viewers keep pid 0 for the kernel). Its tracks are
//
//   - operations: one span per recorded operation, named "AllReduce #12"
//     (its sequence number in its communicator), with "(failed)" or
//     "(running)" appended when it did not finish. Its arguments are the
//     communicator, sequence number, algorithm, element type, count,
//     bytes, state, error, the last wait it was in (step, peer and
//     direction: the wait it hangs in if it still runs), the cells and bytes
//     posted on each path while it ran, and the cells posted again, path
//     resets begun (give_ups) and completed (resets). An instant "path
//     reset" marks the end of an operation during which a path was reset.
//   - peer P: the same operations again, on the track of each peer they
//     waited on, with the path traffic; last_wait says the operation's
//     last wait, the one it hangs in if it still runs, was for this peer.
//
// A span of an operation still running when its rank was dumped ends at
// the dump, and an instant "dump" on each rank says when it was taken and
// why. Operations that overlap in time (on two communicators, or
// non-blocking ones) go on further lanes, "operations (2)", since a track
// shows one span at a time. The times count in microseconds from the
// earliest start of an operation in the job (otherData.start gives it as
// a wall-clock time); they are the ranks' wall clocks, so ranks on hosts
// whose clocks disagree are shifted by the difference.
//
// Traffic is counted per process, not per operation: operations that run
// at the same time each show all that was posted meanwhile.
//
// # The picture
//
// timeline.svg has one row per rank, with the time since the first
// operation began along the bottom. Each operation is a bar coloured by
// its name (the legend below says which); a failed one is outlined in
// red, one still running when its rank was dumped is hatched (and labelled
// "running" where there is room), and a small black triangle marks the end
// of one during which a path was reset. A rank that is late shows as a row
// whose bars start to the right of the others', which wait for it and so
// draw longer. Every bar's tooltip says what the operation was.
//
// Operations narrower than a pixel are drawn as part of the bar before
// them when that has the same name and finished well (RenderSVG says
// exactly when), so that thousands of operations of 64 ranks draw in a
// picture of a few hundred kilobytes that still reads at a glance; failed,
// running and reset operations always have a bar of their own, at least a
// few pixels wide. testdata/example.png is a job of four ranks in which
// rank 2 enters every reduction late.
package timeline
