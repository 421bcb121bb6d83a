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
                pts[k].append((float(r["time_us"]), float(r["busbw_GBps"]), r["check"],
                               float(r["time_us_min"]), float(r["time_us_max"])))
    return pts


def median(rows):
    if not rows:
        return None
    t = st.median(r[0] for r in rows)
    b = st.median(r[1] for r in rows)
    # spread: the fastest and slowest repetition over all runs
    spread = (min(r[3] for r in rows), max(r[4] for r in rows))
    ok = all(r[2] == "ok" for r in rows)
    return t, b, spread, ok, len(rows)


def fmt_t(us):
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.2f} µs"


def size(b):
    return f"{b // MiB} MiB" if b >= MiB else f"{b} B"


pts = load(os.path.join(res, "cellbench", "coll_key.csv"))
pts.update(load(os.path.join(res, "refs", "coll_key.csv")))

print("Times are the median over runs of each run's median repetition, [fastest–slowest repetition over all runs]; busbw GB/s (1e9).\n")
print("| point | cellbench time / busbw | reference | reference time / busbw | time ratio (ref/ours) | busbw ratio (ours/ref) | goal | met |")
print("|---|---|---|---|---|---|---|---|")
for ours, refs, n, coll, nbytes, kind, goal in POINTS:
    o = median(pts.get((ours, n, coll, nbytes), []))
    point = f"{coll} {size(nbytes)}, {ours.removeprefix('cell_')}"
    if o is None:
        print(f"| {point} | not measured | | | | | | |")
        continue
    ocell = f"{fmt_t(o[0])} [{fmt_t(o[2][0])}–{fmt_t(o[2][1])}] / {o[1]:.2f}" + ("" if o[3] else " WRONG")
    # the best reference: shortest time for the time goals, else highest busbw
    meds = {ref: median(pts.get((ref, n, coll, nbytes), [])) for ref in refs}
    meds = {k: v for k, v in meds.items() if v is not None}
    best = None
    if meds:
        if kind in ("time_max_us", "time_ratio"):
            best = min(meds, key=lambda k: meds[k][0])
        else:
            best = max(meds, key=lambda k: meds[k][1])
    for ref in refs:
        r = meds.get(ref)
        if r is None:
            continue
        # same bytes, ranks and busbw factor on both sides, so the busbw ratio
        # is the time ratio; computed from times, as the CSVs round small busbw to 0
        tr = br = r[0] / o[0]
        goal_s, met = "", ""
        # the goal is judged once, against the reference the issue names
        # (the first of the point's list); the other rows are for context
        if ref != next(iter(meds)):
            kind_row = None
        else:
            kind_row = kind
        if kind_row is None:
            pass
        elif kind == "time_max_us":
            goal_s, met = f"≤ {goal} µs", o[0] <= goal
        elif kind == "time_ratio":
            goal_s, met = f"≤ {goal}× ref time", o[0] <= goal * r[0]
        elif kind == "busbw_ratio":
            goal_s, met = f"≥ {goal}× ref busbw", br >= goal
        met_s = "" if met == "" else ("yes" if met else "no")
        rname = ref + (" (goal ref)" if ref == next(iter(meds)) else "") + (" **best**" if ref == best and len(meds) > 1 else "")
        print(f"| {point} | {ocell} | {rname} | {fmt_t(r[0])} [{fmt_t(r[2][0])}–{fmt_t(r[2][1])}] / {r[1]:.2f} | {tr:.3g} | {br:.3g} | {goal_s} | {met_s} |")
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

# the machine during the run: cellbench rounds (load average at start and
# end) and the references' steps (CPU used by other processes)
cload = os.path.join(res, "cellbench", "load.txt")
if os.path.exists(cload):
    print("\ncellbench rounds: " + "; ".join(l.strip() for l in open(cload) if l.strip()))
rload = os.path.join(res, "refs", "load.csv")
if os.path.exists(rload):
    with open(rload) as f:
        rows = list(csv.DictReader(f))
    if rows:
        la = [float(r["loadavg1_before"]) for r in rows]
        fr = [float(r["foreign_frac_of_2cpu"]) for r in rows]
        print(f"references: {len(rows)} steps, load average 1 min before each step median {st.median(la):.1f} "
              f"[{min(la):.1f}–{max(la):.1f}], CPU of other processes median {100 * st.median(fr):.0f}% of the 2 CPUs "
              f"[{100 * min(fr):.0f}–{100 * max(fr):.0f}%]")
