#!/bin/sh
# Seeds 1-3 of the 80 % AliStorage2019 point of the Figure-5 sweep (same
# setting: K=8, 2 ms of arrivals, 0.5 ms warm-up), every scheme on each
# seed's flows, one simulation at a time (bench/sim/README.md, "Seeds").
# From the repository root: sh bench/sim/seeds.sh [workload-dir]
set -e
W=${1:-../shared/data/workloads}
go build -o cellsim ./sim/cellsim
GOMAXPROCS=1 nice -n 10 ./cellsim -k 8 --schemes ecmp,letflow,conga,hula,conweave,rdmacell,rdmacell-ecmp,rdmacell-spray \
  --workloads "$W/AliStorage2019.txt" --loads 0.8 --seeds 3 --duration 2ms --warmup 0.5ms -j 1 --plot=false --out bench/sim/seeds
rm -f cellsim
# mean and spread per scheme
awk -F, 'NR > 1 { n[$1]++; a[$1] += $7; p[$1] += $10; a2[$1] += $7*$7; p2[$1] += $10*$10
  if (!($1 in lo) || $10 < lo[$1]) lo[$1] = $10; if ($10 > hi[$1]) hi[$1] = $10; if (!($1 in o)) o[$1] = m++; s[o[$1]] = $1 }
  END { for (i = 0; i < m; i++) { k = s[i]; printf "%s avg %.2f±%.2f p99 %.2f±%.2f [%.2f..%.2f]\n", k, a[k]/n[k], sqrt(a2[k]/n[k]-(a[k]/n[k])^2), p[k]/n[k], sqrt(p2[k]/n[k]-(p[k]/n[k])^2), lo[k], hi[k] } }' bench/sim/seeds/results.csv
