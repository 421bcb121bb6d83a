#!/bin/sh
# The 80 % AliStorage2019 point at K=8, lossless (-pfc, the soft timeout's
# lossless floor), ECMP, ConWeave and RDMACell on seeds 1-3
# (bench/sim/README.md, "Lossless"): 2 ms of arrivals (0.5 ms warm-up) for
# all three, then 20 ms (5 ms warm-up) for ECMP and RDMACell on seeds 2
# and 3 (seed 1 is the speed run, speed.sh) and ConWeave on seed 1. One
# simulation at a time, niced, on one core; about 40 minutes of CPU.
# From the repository root:
#   sh bench/sim/pfc-seeds.sh [workload-dir] [2ms|20ms|all]
set -e
W=${1:-../shared/data/workloads}
WHAT=${2:-all}
go build -o cellsim ./sim/cellsim
if [ "$WHAT" != 20ms ]; then
  GOMAXPROCS=1 nice -n 10 ./cellsim -k 8 --schemes ecmp,conweave,rdmacell --workloads "$W/AliStorage2019.txt" \
    --loads 0.8 --seeds 3 --pfc --duration 2ms --warmup 0.5ms -j 1 --plot=false --out bench/sim/pfc-seeds/2ms
fi
if [ "$WHAT" != 2ms ]; then
  for seed in 2 3; do
    for s in ecmp rdmacell; do
      GOMAXPROCS=1 nice -n 10 ./cellsim -k 8 --schemes $s --workloads "$W/AliStorage2019.txt" \
        --loads 0.8 --first-seed $seed --pfc --duration 20ms --warmup 5ms -j 1 --plot=false --out bench/sim/pfc-seeds/20ms-$s-seed$seed
    done
  done
  GOMAXPROCS=1 nice -n 10 ./cellsim -k 8 --schemes conweave --workloads "$W/AliStorage2019.txt" \
    --loads 0.8 --first-seed 1 --pfc --duration 20ms --warmup 5ms -j 1 --plot=false --out bench/sim/pfc-seeds/20ms-conweave-seed1
fi
rm -f cellsim
