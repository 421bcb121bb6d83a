#!/bin/sh
# Collective-shaped traffic (bench/sim/README.md, "Collectives"): K=8
# fat-tree, 128 ranks one per host, 4 MiB per rank, ring AllReduce and
# pairwise AllToAll as package collectives schedules them, ranks in host
# order and scattered at random, every scheme on the same schedule. One
# simulation at a time, niced. From the repository root:
#   sh bench/sim/collective.sh
set -e
go build -o cellsim ./sim/cellsim
nice -n 10 ./cellsim -k 8 --collective allreduce,alltoall --placement linear,random --ranks 128 --coll-bytes 4MiB \
  --schemes ecmp,letflow,conga,hula,conweave,rdmacell,rdmacell-ecmp,rdmacell-spray \
  -j 1 --out bench/sim/collective
rm -f cellsim
