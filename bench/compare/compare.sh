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
#   KEY_RUNS      rounds of cellbench key points (default 3); round 1 runs
#                 before the references, rounds 2.. after them
#   REF_KEY_RUNS  rounds of the references' key points (default KEY_RUNS)
#   GOAL_ONLY=1   cellbench measures only the issue's goal points (allreduce
#                 8 B/1 MiB/64 MiB shm, allgather/alltoall 64 MiB shm,
#                 allreduce 8 B/64 MiB tcp) instead of all key points
#   CELL_WARM, CELL_REPS, CELL_REP_TIME   cellbench -w, --reps, --rep-time
#                 (default 5, 5, 40ms); CELL_BIG_WARM, CELL_BIG_REPS for
#                 sizes of 16 MiB and more (default 2, 3: they take ~0.2 s
#                 or more per call here)
#   SKIP_LAUNCH=1 skip the launch-time and idle-CPU measurements
#   SKIP_INSTALL=1, SKIP_REFS=1   reuse installed packages / earlier reference results
#   SKIP_FULL=1   skip the references' full sweeps (passed to run_all.sh)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ANCHORS=${ANCHORS:-$ROOT/../shared/anchors}
RES=$(mkdir -p "${RESULTS_DIR:-compare-results}" && cd "${RESULTS_DIR:-compare-results}" && pwd)
KEY_RUNS=${KEY_RUNS:-3}
REF_KEY_RUNS=${REF_KEY_RUNS:-$KEY_RUNS}
CELL_WARM=${CELL_WARM:-5} CELL_REPS=${CELL_REPS:-5} CELL_REP_TIME=${CELL_REP_TIME:-40ms}
CELL_BIG_WARM=${CELL_BIG_WARM:-2} CELL_BIG_REPS=${CELL_BIG_REPS:-3}
BIN=$(mktemp -d "${TMPDIR:-/tmp}/cellbench-bin.XXXXXX")
trap 'rm -rf "$BIN"' EXIT
log() { echo "compare: $*" >&2; }

[ -x "$ANCHORS/run_all.sh" ] || { log "no run_all.sh in $ANCHORS (set ANCHORS)"; exit 1; }
(cd "$ROOT" && go build -o "$BIN/" ./launcher/cellrun ./bench/cellbench)
CELLRUN="$BIN/cellrun" CELLBENCH="$BIN/cellbench"

# One configuration of cellbench, appending its out-of-place rows to CSV.
# cell LABEL RUN NRANKS TRANSPORT COLLECTIVE SIZES...
cell() {
  local label=$1 run=$2 n=$3 transport=$4 coll=$5 size w reps; shift 5
  for size in "$@"; do
    case $size in
      16M|32M|64M|*G) w=$CELL_BIG_WARM reps=$CELL_BIG_REPS ;;
      *) w=$CELL_WARM reps=$CELL_REPS ;;
    esac
    "$CELLRUN" -n "$n" --transport "$transport" --no-prefix "$CELLBENCH" "$coll" \
      -b "$size" -e "$size" -n 1 -w "$w" --reps "$reps" --rep-time "$CELL_REP_TIME" -c 1 \
      --label "$label" --run "$run" --csv "$RES/cellbench/coll_key.csv" >> "$RES/cellbench/tables.txt" \
      2>> "$RES/cellbench/stderr.txt" && continue
    # One retry: on a loaded machine a rank can lose its etcd lease and the
    # job fails before measuring; a failed attempt writes no CSV row.
    log "cellbench $label $coll $size failed (stderr in $RES/cellbench/stderr.txt); retrying once"
    "$CELLRUN" -n "$n" --transport "$transport" --no-prefix "$CELLBENCH" "$coll" \
      -b "$size" -e "$size" -n 1 -w "$w" --reps "$reps" --rep-time "$CELL_REP_TIME" -c 1 \
      --label "$label" --run "$run" --csv "$RES/cellbench/coll_key.csv" >> "$RES/cellbench/tables.txt" \
      2>> "$RES/cellbench/stderr.txt" || log "cellbench $label $coll $size failed twice"
  done
}

# The key points of the references' run, for each of our configurations.
cell_round() {
  local r=$1
  log "cellbench key round $r"
  echo "round $r start $(date -Is) loadavg $(cut -d' ' -f1-3 /proc/loadavg)" >> "$RES/cellbench/load.txt"
  if [ "${GOAL_ONLY:-0}" = 1 ]; then
    cell cell_shm "$r" 2 shm allreduce 8 1M 64M
    cell cell_shm "$r" 2 shm allgather 64M
    cell cell_shm "$r" 2 shm alltoall 64M
    cell cell_tcp "$r" 2 tcp allreduce 8 64M
    echo "round $r end $(date -Is) loadavg $(cut -d' ' -f1-3 /proc/loadavg)" >> "$RES/cellbench/load.txt"
    return
  fi
  cell cell_shm "$r" 2 shm allreduce 8 1K 64K 1M 16M 64M
  cell cell_shm "$r" 2 shm allgather 1M 64M
  cell cell_shm "$r" 2 shm alltoall 1M 64M
  cell cell_tcp "$r" 2 tcp allreduce 8 1K 64K 1M 16M 64M
  cell cell_tcp "$r" 2 tcp allgather 1M 64M
  cell cell_tcp "$r" 2 tcp alltoall 1M 64M
  cell cell_shm_np4 "$r" 4 shm allreduce 8 1K 64K 1M 16M 64M
  echo "round $r end $(date -Is) loadavg $(cut -d' ' -f1-3 /proc/loadavg)" >> "$RES/cellbench/load.txt"
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
  RESULTS_DIR="$RES/refs" KEY_RUNS=$REF_KEY_RUNS SKIP_FULL=${SKIP_FULL:-0} "$ANCHORS/run_all.sh"
fi
for r in $(seq 2 "$KEY_RUNS"); do cell_round "$r"; done
[ "${SKIP_LAUNCH:-0}" = 1 ] || launch_times

python3 "$ANCHORS/summarize.py" "$RES/cellbench" > "$RES/cellbench/summary.md"
python3 "$ROOT/bench/compare/table.py" "$RES" | tee "$RES/comparison.md"
