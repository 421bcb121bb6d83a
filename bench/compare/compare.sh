#!/usr/bin/env bash
# compare.sh: runs the reference benchmarks (Open MPI, MPICH, Gloo) and
# cellbench on this machine and writes one comparison table.
#
#   bench/compare/compare.sh                  # from the repository root
#   ANCHORS=/path/to/anchors RESULTS_DIR=out KEY_RUNS=3 bench/compare/compare.sh
#
# The references come from the anchors directory, found next to the
# repository as ../shared/anchors unless ANCHORS says otherwise. cellbench
# takes its key points in rounds placed before and after the references'
# run, so that both sides see the same machine; every figure is a median.
#
# Environment:
#   ANCHORS       anchors directory (install.sh, run_all.sh, summarize.py)
#   RESULTS_DIR   where results go (default ./compare-results)
#   KEY_RUNS      rounds of key points, for each side (default 3)
#   SKIP_INSTALL=1, SKIP_REFS=1   reuse installed packages / earlier reference results
#   SKIP_FULL=1   skip the references' full sweeps (passed to run_all.sh)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ANCHORS=${ANCHORS:-$ROOT/../shared/anchors}
RES=$(mkdir -p "${RESULTS_DIR:-compare-results}" && cd "${RESULTS_DIR:-compare-results}" && pwd)
KEY_RUNS=${KEY_RUNS:-3}
BIN=$(mktemp -d "${TMPDIR:-/tmp}/cellbench-bin.XXXXXX")
trap 'rm -rf "$BIN"' EXIT
log() { echo "compare: $*" >&2; }

[ -x "$ANCHORS/run_all.sh" ] || { log "no run_all.sh in $ANCHORS (set ANCHORS)"; exit 1; }
(cd "$ROOT" && go build -o "$BIN/" ./launcher/cellrun ./bench/cellbench)
CELLRUN="$BIN/cellrun" CELLBENCH="$BIN/cellbench"

# One configuration of cellbench, appending its out-of-place rows to CSV.
# cell LABEL RUN NRANKS TRANSPORT COLLECTIVE SIZES...
cell() {
  local label=$1 run=$2 n=$3 transport=$4 coll=$5 size; shift 5
  for size in "$@"; do
    "$CELLRUN" -n "$n" --transport "$transport" --no-prefix "$CELLBENCH" "$coll" \
      -b "$size" -e "$size" -n 1 -w 5 --reps 5 --rep-time 40ms -c 1 \
      --label "$label" --run "$run" --csv "$RES/cellbench/coll_key.csv" >> "$RES/cellbench/tables.txt" \
      || log "cellbench $label $coll $size failed"
  done
}

# The key points of the references' run, for each of our configurations.
cell_round() {
  local r=$1
  log "cellbench key round $r"
  cell cell_shm "$r" 2 shm allreduce 8 1K 64K 1M 16M 64M
  cell cell_shm "$r" 2 shm allgather 1M 64M
  cell cell_shm "$r" 2 shm alltoall 1M 64M
  cell cell_tcp "$r" 2 tcp allreduce 8 1K 64K 1M 16M 64M
  cell cell_tcp "$r" 2 tcp allgather 1M 64M
  cell cell_tcp "$r" 2 tcp alltoall 1M 64M
  cell cell_shm_np4 "$r" 4 shm allreduce 8 1K 64K 1M 16M 64M
}

# Start to exit of a 2-rank job doing one 8-byte broadcast.
launch_times() {
  local i t0 t1
  for i in 1 2 3 4 5 6; do
    t0=$(date +%s%N)
    "$CELLRUN" -n 2 "$CELLBENCH" broadcast -b 8 -e 8 -n 1 -w 0 --reps 1 -c 0 > /dev/null
    t1=$(date +%s%N)
    [ "$i" -gt 1 ] && echo "$(( (t1 - t0) / 1000000 ))"   # the first run warms the caches
  done > "$RES/cellbench/launch_ms.txt"
  "$CELLRUN" -n 2 "$CELLBENCH" allreduce -b 8 -e 8 -n 10 -w 1 --reps 1 --idle 5s \
    | grep 'Idle CPU' > "$RES/cellbench/idle.txt" || true
}

rm -rf "$RES/cellbench" && mkdir -p "$RES/cellbench"
[ "${SKIP_INSTALL:-0}" = 1 ] || "$ANCHORS/install.sh"
cell_round 1
if [ "${SKIP_REFS:-0}" != 1 ]; then
  log "reference benchmarks (run_all.sh)"
  RESULTS_DIR="$RES/refs" KEY_RUNS=$KEY_RUNS SKIP_FULL=${SKIP_FULL:-0} "$ANCHORS/run_all.sh"
fi
for r in $(seq 2 "$KEY_RUNS"); do cell_round "$r"; done
launch_times

python3 "$ANCHORS/summarize.py" "$RES/cellbench" > "$RES/cellbench/summary.md"
python3 "$ROOT/bench/compare/table.py" "$RES" | tee "$RES/comparison.md"
