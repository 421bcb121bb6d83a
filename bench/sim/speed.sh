#!/bin/sh
# The speed runs of bench/sim/README.md ("Speed"): K=8, AliStorage2019 at
# 80 %, 20 ms of arrivals (5 ms warm-up), lossless (-pfc: lossy, the
# fabric collapses within 20 ms, README "Longer runs"), ECMP and RDMACell,
# each alone on one core (GOMAXPROCS=1, niced), with a CPU profile. CPU
# time and peak memory go to speed/<scheme>-pfc-time.txt; wall time and
# events per second are in the CSVs (wall_s, events_per_s).
# From the repository root: sh bench/sim/speed.sh [workload-dir]
set -e
W=${1:-../shared/data/workloads}
D=bench/sim/speed
go build -o cellsim ./sim/cellsim
for s in ecmp rdmacell; do
  GOMAXPROCS=1 /usr/bin/time -f "$s %U user %S sys %e wall %M KB" -o $D/$s-pfc-time.txt \
    nice -n 10 ./cellsim -k 8 --schemes $s --workloads "$W/AliStorage2019.txt" --loads 0.8 --pfc \
    --duration 20ms --warmup 5ms -j 1 --plot=false --cpuprofile $D/$s-pfc.prof --out $D/$s-pfc
  go tool pprof -top -nodecount=25 cellsim $D/$s-pfc.prof > $D/$s-pfc-profile.txt
  rm $D/$s-pfc.prof
done
rm -f cellsim
