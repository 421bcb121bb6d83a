// Package bench is the engine of cellbench: it runs one collective over a
// range of message sizes on a communicator and reports, as nccl-tests does,
// the time per call, the algorithm and bus bandwidths and the number of
// wrong values, for the out-of-place and the in-place form.
//
// Timing follows nccl-tests: a repetition is a barrier followed by
// back-to-back calls; its per-call time is the elapsed time divided by the
// number of calls, taken as the maximum over the ranks. A row reports the
// median of the repetitions.
package bench
