// Package flight is a rank's flight recorder: the last operations it ran,
// kept in a fixed ring so that recording one costs no allocation, with
// latency histograms per operation and size class, written out as one
// JSON file per rank when a job fails, stalls or is asked to.
//
// The communicator owns one Recorder per process (comm.Comm.Recorder);
// the collectives record every operation in it: Begin when it starts,
// Wait each time it starts waiting for a peer, End when it finishes. A
// watchdog reads the open operations (Open) to find the ones that wait too
// long, and a stall report says what they wait for.
//
// A Dump is the recorder's content with who wrote it, why and when; it is
// the file format (WriteFile, ReadFile). Package flight/timeline merges the
// dumps of a job into a Chrome trace-event file that Perfetto and
// chrome://tracing open, and renders it as a picture.
package flight
