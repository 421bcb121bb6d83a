#!/bin/sh
# The speed runs of bench/sim/README.md ("Speed"): K=8, AliStorage2019 at
# 80 %, 20 ms of arrivals (5 ms warm-up), ECMP and RDMACell, each alone on
# one core (GOMAXPROCS=1, niced), with a CPU profile. Wall time and events
# per second are in the CSVs (wall_s, events_per_s). RDMACell gets 5 ms of
# drain, not 50: at 80 % its fabric collapses within the 20 ms and the
# run's memory grows with the flows left (README). From the repository
# root: sh bench/sim/speed.sh [workload-dir]
set -e
W=${1:-../shared/data/workloads}
go build -o cellsim ./sim/cellsim
for s in ecmp rdmacell; do
  drain=50ms
  [ $s = rdmacell ] && drain=5ms
  GOMAXPROCS=1 nice -n 10 ./cellsim -k 8 -schemes $s -workloads "$W/AliStorage2019.txt" -loads 0.8 \
    -duration 20ms -warmup 5ms -drain $drain -j 1 -plot=false -cpuprofile bench/sim/speed/$s.prof -out bench/sim/speed/$s
  go tool pprof -top -nodecount=25 cellsim bench/sim/speed/$s.prof > bench/sim/speed/$s-profile.txt
  rm bench/sim/speed/$s.prof
done
rm -f cellsim
