#!/usr/bin/env python3
"""table.py RESULTS_DIR: cellbench against the references, one markdown table.

Reads RESULTS_DIR/refs/coll_key.csv (the references' run_all.sh) and
RESULTS_DIR/cellbench/coll_key.csv (compare.sh), both in the same columns,
takes the median time of each point over the runs, and prints for every
goal point of the project the ratio of the two sides.
"""
import csv
import os
import statistics as st
import sys
from collections import defaultdict

res = sys.argv[1] if len(sys.argv) > 1 else "compare-results"
MiB = 1 << 20

# (our label, reference labels, nranks, collective, bytes, goal kind, goal)
# goal kinds: "time_max_us" (our time at most), "time_ratio" (our time at
# most goal x the reference's), "busbw_ratio" (our busbw at least goal x).
POINTS = [
    ("cell_shm", ["ompi_shm", "ompi_shm+malloc", "mpich"], 2, "allreduce", 8, "time_max_us", 1.0),
    ("cell_shm", ["ompi_shm", "ompi_shm+malloc", "mpich"], 2, "allreduce", MiB, "busbw_ratio", 1.2),
    ("cell_shm", ["ompi_shm+malloc", "ompi_shm", "mpich+malloc"], 2, "allreduce", 64 * MiB, "busbw_ratio", 1.5),
    ("cell_shm", ["ompi_shm", "mpich"], 2, "allgather", 64 * MiB, "busbw_ratio", 1.2),
    ("cell_shm", ["ompi_shm", "mpich"], 2, "alltoall", 64 * MiB, "busbw_ratio", 1.2),
    ("cell_tcp", ["ompi_tcp", "gloo_tcp"], 2, "allreduce", 8, "time_ratio", 1.2),
    ("cell_tcp", ["ompi_tcp+malloc", "ompi_tcp", "gloo_tcp"], 2, "allreduce", 64 * MiB, "busbw_ratio", 1.3),
    ("cell_shm_np4", ["ompi_shm_np4", "ompi_shm_np4+malloc"], 4, "allreduce", 8, None, None),
    ("cell_shm_np4", ["ompi_shm_np4+malloc", "ompi_shm_np4"], 4, "allreduce", 64 * MiB, None, None),
]


def load(path):
    pts = defaultdict(list)
    if os.path.exists(path):
        with open(path) as f:
            for r in csv.DictReader(f):
                k = (r["label"], int(r["nranks"]), r["collective"], int(r["bytes"]))
                pts[k].append((float(r["time_us"]), float(r["busbw_GBps"]), r["check"]))
    return pts


def median(rows):
    if not rows:
        return None
    t = st.median(r[0] for r in rows)
    b = st.median(r[1] for r in rows)
    spread = (min(r[0] for r in rows), max(r[0] for r in rows))
    ok = all(r[2] == "ok" for r in rows)
    return t, b, spread, ok, len(rows)


def fmt_t(us):
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.2f} µs"


def size(b):
    return f"{b // MiB} MiB" if b >= MiB else f"{b} B"


pts = load(os.path.join(res, "cellbench", "coll_key.csv"))
pts.update(load(os.path.join(res, "refs", "coll_key.csv")))

print("| point | cellbench time / busbw | reference | reference time / busbw | time ratio (ref/ours) | busbw ratio (ours/ref) | goal | met |")
print("|---|---|---|---|---|---|---|---|")
for ours, refs, n, coll, nbytes, kind, goal in POINTS:
    o = median(pts.get((ours, n, coll, nbytes), []))
    point = f"{coll} {size(nbytes)}, {ours.removeprefix('cell_')}"
    if o is None:
        print(f"| {point} | not measured | | | | | | |")
        continue
    ocell = f"{fmt_t(o[0])} [{fmt_t(o[2][0])}–{fmt_t(o[2][1])}] / {o[1]:.2f}" + ("" if o[3] else " WRONG")
    for ref in refs:
        r = median(pts.get((ref, n, coll, nbytes), []))
        if r is None:
            continue
        tr, br = r[0] / o[0], (o[1] / r[1] if r[1] > 0 else float("nan"))
        goal_s, met = "", ""
        if kind == "time_max_us":
            goal_s, met = f"≤ {goal} µs", o[0] <= goal
        elif kind == "time_ratio":
            goal_s, met = f"≤ {goal}× ref time", o[0] <= goal * r[0]
        elif kind == "busbw_ratio":
            goal_s, met = f"≥ {goal}× ref busbw", br >= goal
        met_s = "" if met == "" else ("yes" if met else "no")
        print(f"| {point} | {ocell} | {ref} | {fmt_t(r[0])} / {r[1]:.2f} | {tr:.2f} | {br:.2f} | {goal_s} | {met_s} |")
        point, ocell = "", ""
    if ocell:
        print(f"| {point} | {ocell} | (no reference) | | | | | |")

launch = os.path.join(res, "cellbench", "launch_ms.txt")
if os.path.exists(launch):
    ms = [float(x) for x in open(launch).read().split()]
    line = f"\ncellrun start to exit, 2 ranks, one 8-byte broadcast: median {st.median(ms):.0f} ms [{min(ms):.0f}–{max(ms):.0f}]"
    refs_launch = os.path.join(res, "refs", "launch.csv")
    if os.path.exists(refs_launch):
        by = defaultdict(list)
        with open(refs_launch) as f:
            for r in csv.DictReader(f):
                by[r["command"]].append(float(r["median"]) * 1000)
        line += "; references: " + ", ".join(f"{k} {st.median(v):.0f} ms" for k, v in by.items())
    print(line)
idle = os.path.join(res, "cellbench", "idle.txt")
if os.path.exists(idle):
    print(open(idle).read().strip().lstrip("[0] "))
