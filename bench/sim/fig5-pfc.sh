#!/bin/sh
# The Figure-5 sweep of bench/sim/README.md in the lossless setting
# ("Figure 5, lossless (PFC)"): as run.sh (K=8 fat-tree, 100 Gbps, 1 us
# per hop, 2 MB per port, ECN; every scheme in the same run on the same
# flows, seed 1; AliStorage2019 and Solar2022 at 20/50/80 % load; arrivals
# over 2 ms, the first 0.5 ms not counted), with PFC (-pfc: pauses
# instead of drops, the 4 ms Go-Back-N RTO and RDMACell's lossless
# soft-timeout floor derived from the fabric). Two simulations at a time,
# niced; about 6 minutes of CPU (3.5 minutes of wall time on two cores).
# From the repository root:
#   sh bench/sim/fig5-pfc.sh [workload-dir]
set -e
W=${1:-../shared/data/workloads}
go build -o cellsim ./sim/cellsim
nice -n 10 ./cellsim -k 8 --schemes ecmp,letflow,conga,hula,conweave,rdmacell,rdmacell-ecmp,rdmacell-spray \
  --workloads "$W/AliStorage2019.txt,$W/Solar2022.txt" --loads 0.2,0.5,0.8 --pfc \
  --duration 2ms --warmup 0.5ms -j 2 --out bench/sim/fig5-pfc
rm -f cellsim
