#!/bin/sh
# The Figure-5 sweep on pair connections (bench/sim/README.md, "Figure 5
# on pair connections"): K=8 fat-tree, lossless (--pfc) and lossy, seeds
# 1-3, arrivals over 2 ms (the first 0.5 ms not counted). ECMP and
# ConWeave as in the paper, a QP per flow; RDMACell (adaptive, and the
# paper's primary-QP policy) on one long-lived connection per host pair,
# as ranks keep. First the goal's point, 80 % AliStorage2019, with round
# robin too and two labelled comparisons: RDMACell on a fresh connection
# per flow (the model before, --conn flow) and ECMP on one QP per host
# pair (--conn pair); then the other points (AliStorage2019 at 20 and
# 50 %, Solar2022 at 20, 50 and 80 %); last, the goal's point with
# DCQCN keeping its target rate through a burst of cuts
# (--dcqcn-keep-target), and lossless without DCQCN. Each part is one cellsim run into a
# directory of its own, two simulations at a time, niced; about 45
# minutes of CPU. The table part prints the README's tables.
# From the repository root:
#   sh bench/sim/fig5-pair.sh [workload-dir] [all|goal|rest|keep|nodcqcn|table]
set -e
W=${1:-../shared/data/workloads}
WHAT=${2:-all}
D=bench/sim/fig5-pair
run() {
  out=$1
  shift
  nice -n 19 ./cellsim -k 8 --seeds 3 --duration 2ms --warmup 0.5ms -j 2 --plot=false --out "$out" "$@"
}
if [ "$WHAT" != table ]; then
  go build -o cellsim ./sim/cellsim
fi
if [ "$WHAT" = all ] || [ "$WHAT" = goal ]; then
  for mode in pfc lossy; do
    pfc=--pfc
    [ $mode = pfc ] || pfc=--pfc=false
    run $D/$mode/ali80 $pfc --schemes ecmp,conweave,rdmacell,rdmacell-ecmp,rdmacell-spray --workloads "$W/AliStorage2019.txt" --loads 0.8
    run $D/$mode/ali80-per-flow $pfc --schemes rdmacell,rdmacell-ecmp,rdmacell-spray --conn flow --workloads "$W/AliStorage2019.txt" --loads 0.8
    run $D/$mode/ali80-ecmp-pair $pfc --schemes ecmp --conn pair --workloads "$W/AliStorage2019.txt" --loads 0.8
  done
fi
if [ "$WHAT" = all ] || [ "$WHAT" = rest ]; then
  for mode in pfc lossy; do
    pfc=--pfc
    [ $mode = pfc ] || pfc=--pfc=false
    run $D/$mode/ali $pfc --schemes ecmp,conweave,rdmacell,rdmacell-ecmp --workloads "$W/AliStorage2019.txt" --loads 0.2,0.5
    run $D/$mode/solar $pfc --schemes ecmp,conweave,rdmacell,rdmacell-ecmp --workloads "$W/Solar2022.txt" --loads 0.2,0.5,0.8
  done
fi
if [ "$WHAT" = all ] || [ "$WHAT" = keep ]; then
  # The goal's point with DCQCN keeping its target rate through a burst
  # of cuts (CLAMP_TARGET_RATE 0, the ConWeave setting).
  for mode in pfc lossy; do
    pfc=--pfc
    [ $mode = pfc ] || pfc=--pfc=false
    run $D/$mode/ali80-keep $pfc --dcqcn-keep-target --schemes ecmp,conweave,rdmacell,rdmacell-ecmp --workloads "$W/AliStorage2019.txt" --loads 0.8
    run $D/$mode/ali80-keep-per-flow $pfc --dcqcn-keep-target --schemes rdmacell --conn flow --workloads "$W/AliStorage2019.txt" --loads 0.8
    run $D/$mode/ali80-keep-ecmp-pair $pfc --dcqcn-keep-target --schemes ecmp --conn pair --workloads "$W/AliStorage2019.txt" --loads 0.8
  done
fi
if [ "$WHAT" = all ] || [ "$WHAT" = nodcqcn ]; then
  # What the long-lived QPs' DCQCN state costs: the goal's point,
  # lossless, with every QP at line rate.
  run $D/pfc/ali80-no-dcqcn --pfc --no-dcqcn --schemes ecmp,conweave,rdmacell --workloads "$W/AliStorage2019.txt" --loads 0.8
  run $D/pfc/ali80-no-dcqcn-per-flow --pfc --no-dcqcn --schemes rdmacell --conn flow --workloads "$W/AliStorage2019.txt" --loads 0.8
fi
[ "$WHAT" = table ] || rm -f cellsim
[ "$WHAT" = all ] || [ "$WHAT" = table ] || exit 0
# Per fabric: the goal's point (80 % AliStorage2019), every row of every
# seed, with its ratios to the baselines of the same flows (avg ÷ ECMP's,
# p99 ÷ ECMP's, p99 ÷ ConWeave's: ECMP and ConWeave on a QP per flow, with
# DCQCN or, for the rows without, without); then the other points, RDMACell's ratios
# per seed (adaptive, and the paper's primary-QP policy).
for mode in pfc lossy; do
  echo "### $mode, AliStorage2019 80 %"
  awk -F, '$1 != "scheme" {
    k = $4 (FILENAME ~ /no-dcqcn/ ? " (no DCQCN)" : FILENAME ~ /keep/ ? " (keep target)" : ""); name = $1 "/" $28
    if ($1 == "ecmp" && $28 == "flow") { ea[k] = $7; ep[k] = $10 }
    if ($1 == "conweave") cp[k] = $10
    n++; seed[n] = k; r[n] = name; a[n] = $7; p[n] = $10; rs[n] = $22; dr[n] = $17
  }
  END {
    print "| seed | scheme/conn | avg | p99 | avg ÷ ECMP | p99 ÷ ECMP | p99 ÷ ConWeave | QP resets | drops |"
    print "|---|---|---|---|---|---|---|---|---|"
    for (sd = 1; sd <= 3; sd++) for (i = 1; i <= n; i++) { k = seed[i]; if (k + 0 != sd) continue
      printf "| %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %d | %d |\n", k, r[i], a[i], p[i], a[i] / ea[k], p[i] / ep[k], p[i] / cp[k], rs[i], dr[i]
    }
  }' $(for d in ali80 ali80-per-flow ali80-ecmp-pair ali80-keep ali80-keep-per-flow ali80-keep-ecmp-pair ali80-no-dcqcn ali80-no-dcqcn-per-flow; do
      [ -f $D/$mode/$d/results.csv ] && echo $D/$mode/$d/results.csv; done)
  echo "### $mode, other points"
  cat $D/$mode/ali/results.csv $D/$mode/solar/results.csv | awk -F, '$1 != "scheme" {
    k = $2 " " $3 * 100 " % | " $4
    if (!(k in seen)) { seen[k] = 1; order[n++] = k }
    a[k, $1] = $7; p[k, $1] = $10; rs[k, $1] = $22
  }
  END {
    print "| point | seed | ECMP avg / p99 | ConWeave avg / p99 | RDMACell avg / p99 | ÷ ECMP avg, p99 | ÷ ConWeave p99 | primary-QP ÷ ECMP avg, p99 | QP resets |"
    print "|---|---|---|---|---|---|---|---|---|"
    for (i = 0; i < n; i++) { k = order[i]; e = "ecmp"; c = "conweave"; x = "rdmacell"; y = "rdmacell-ecmp"
      printf "| %s | %.2f / %.2f | %.2f / %.2f | %.2f / %.2f | %.2f, %.2f | %.2f | %.2f, %.2f | %d |\n", k, a[k, e], p[k, e], a[k, c], p[k, c], a[k, x], p[k, x],
        a[k, x] / a[k, e], p[k, x] / p[k, e], p[k, x] / p[k, c], a[k, y] / a[k, e], p[k, y] / p[k, e], rs[k, x]
    }
  }'
done
