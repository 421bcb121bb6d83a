#!/bin/sh
# Reproduces the Figure-5 sweep of bench/sim/README.md: K=8 fat-tree,
# 100 Gbps, 1 us per hop, 2 MB per port, ECN; every scheme in the same
# run; AliStorage2019 and Solar2022 at 20/50/80 % load. Arrivals over
# 2 ms of simulated time, the first 0.5 ms not counted (the paper's
# runs are far longer: see README.md). Run from the repository root:
#   sh bench/sim/run.sh [workload-dir]
set -e
W=${1:-../shared/data/workloads}
go build -o cellsim ./sim/cellsim
nice -n 10 ./cellsim -k 8 --schemes ecmp,letflow,conga,hula,conweave,rdmacell,rdmacell-ecmp,rdmacell-spray \
  --workloads "$W/AliStorage2019.txt,$W/Solar2022.txt" --loads 0.2,0.5,0.8 \
  --duration 2ms --warmup 0.5ms -j 2 --out bench/sim/fig5
rm -f cellsim
