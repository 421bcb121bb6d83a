#!/bin/sh
# The runs after the Figure-5 sweep (bench/sim/README.md), from the
# repository root: sh bench/sim/extra.sh [workload-dir]
#  - ablation: flowcell size 0.5, 1 and 3 BDP, K=8, AliStorage 80 %, lossy;
#    the 1.5 BDP point and the paper's primary-QP policy (rdmacell-ecmp)
#    against ECMP on the same code (ablation/baseline); 1.5 and 3 BDP with
#    the engine's soft-timeout back-off off (ablation/nobackoff-cell-*);
#  - a K=16 fat-tree (1024 hosts), ECMP and RDMACell at 80 %, 0.5 ms of
#    arrivals (0.1 ms warm-up), one core: a size and speed check, not a
#    result. Receivers post 50 us ahead, not 1 ms: at 256 k flows per ms a
#    1 ms lead keeps every flow's receiver engine alive from the start
#    (gigabytes); a grant needs under 10 us at the tokens' priority.
set -e
W=${1:-../shared/data/workloads}
go build -o cellsim ./sim/cellsim
for c in 0.5 1 3; do
  nice -n 10 ./cellsim -k 8 --schemes rdmacell --cell-bdp $c --workloads "$W/AliStorage2019.txt" --loads 0.8 \
    --duration 2ms --warmup 0.5ms -j 1 --plot=false --out bench/sim/ablation/cell-$c
done
nice -n 10 ./cellsim -k 8 --schemes ecmp,rdmacell,rdmacell-ecmp --workloads "$W/AliStorage2019.txt" --loads 0.8 \
  --duration 2ms --warmup 0.5ms -j 1 --plot=false --out bench/sim/ablation/baseline
for c in 1.5 3; do
  nice -n 10 ./cellsim -k 8 --schemes rdmacell --cell-bdp $c --soft-backoff 1 --workloads "$W/AliStorage2019.txt" --loads 0.8 \
    --duration 2ms --warmup 0.5ms -j 1 --plot=false --out bench/sim/ablation/nobackoff-cell-$c
done
GOMAXPROCS=1 nice -n 10 ./cellsim -k 16 --schemes ecmp,rdmacell --workloads "$W/AliStorage2019.txt" --loads 0.8 \
  --recv-lead 50us --duration 0.5ms --warmup 0.1ms -j 1 --plot=false --out bench/sim/k16
rm -f cellsim
