#!/bin/sh
# K=4 (16 hosts), AliStorage2019 at 80 %, runs of 10 and 20 ms: the soft-timeout
# back-off against the livelock, PFC against lossy, and the diagnostics of
# bench/sim/README.md ("Longer runs", "Lossless"). One simulation at a time,
# niced; about eight minutes in all. From the repository root: sh bench/sim/k4.sh [workload-dir]
set -e
W=${1:-../shared/data/workloads}
go build -o cellsim ./sim/cellsim
run() {
  out=$1
  shift
  GOMAXPROCS=1 nice -n 10 ./cellsim -k 4 --workloads "$W/AliStorage2019.txt" --loads 0.8 -j 1 --plot=false --out bench/sim/k4/$out "$@"
}
# With --pfc the soft timeout's floor now defaults to the lossless bound
# (about 20 ms here); these runs are with the lossy setting's 1 ms floor.
run pfc-10ms --schemes rdmacell,rdmacell-ecmp,rdmacell-spray --soft-floor 1ms --duration 10ms --warmup 2ms --pfc
run pfc-10ms-nobackoff --schemes rdmacell --soft-backoff 1 --soft-floor 1ms --duration 10ms --warmup 2ms --pfc
run pfc-20ms --schemes ecmp,conweave,rdmacell,rdmacell-ecmp,rdmacell-spray --soft-floor 1ms --duration 20ms --warmup 5ms --pfc
run pfc-20ms-floor100ms --schemes rdmacell --soft-floor 100ms --duration 20ms --warmup 5ms --pfc
# The floor, from the lossy setting's to the lossless bound, and the
# lossless bound (the default) at 20 ms.
for f in 2ms 5ms 20ms 100ms; do
  run pfc-10ms-floor$f --schemes rdmacell --soft-floor $f --duration 10ms --warmup 2ms --pfc
done
run pfc-20ms-lossless --schemes ecmp,rdmacell,rdmacell-ecmp,rdmacell-spray --duration 20ms --warmup 5ms --pfc
run lossy-10ms --schemes ecmp,rdmacell,rdmacell-ecmp --duration 10ms --warmup 2ms
run lossy-10ms-floor100ms --schemes rdmacell --soft-floor 100ms --duration 10ms --warmup 2ms
run lossy-10ms-1path --schemes rdmacell,rdmacell-ecmp --paths 1 --duration 10ms --warmup 2ms
rm -f cellsim
