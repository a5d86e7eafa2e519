#!/usr/bin/env python3
"""Thirty-sixth session: A/B table of `ferroccl bench` text output of several builds
measured in one device call (files NAME-BUILD-ROUND.txt). Each row: function, timing,
size; per build the median over rounds of the mean of out-of-place and in-place times
(µs); every build's ratio to the first; the wrong-result count over all runs. Not
`ab-summary.py`, which reads `--json` files of two builds and takes minima: these runs
kept only the text tables, of up to four builds, and their rounds are summarised by medians.

Usage: session36-compare.py DIR NAME BUILD [BUILD...]
"""
import glob
import re
import statistics
import sys
from collections import defaultdict


def parse(path):
    rows, function, timing = [], None, None
    for line in open(path):
        m = re.match(r"# ferroccl (\w+) on", line)
        if m:
            function = m.group(1)
        if "back to back" in line:
            timing = "b2b"
        if "CUDA graph" in line:
            timing = "graph"
        f = line.split()
        if not line.startswith("#") and len(f) == 13:
            rows.append(((function, timing, int(f[0])), (float(f[5]) + float(f[9])) / 2, int(f[8]) + int(f[12])))
    return rows


def main():
    d, name, builds = sys.argv[1], sys.argv[2], sys.argv[3:]
    times = defaultdict(lambda: defaultdict(list))
    wrong = 0
    for b in builds:
        for path in sorted(glob.glob(f"{d}/{name}-{b}-*.txt")):
            for key, t, w in parse(path):
                times[key][b].append(t)
                wrong += w
    print(f"{name}: " + " | ".join(builds) + " | " + " | ".join(f"{b}/{builds[0]}" for b in builds[1:]))
    for key in times:
        med = [statistics.median(times[key][b]) if times[key][b] else float("nan") for b in builds]
        size = key[2]
        label = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB" if size >= 1 << 10 else f"{size} B"
        print(f"{key[0]:15} {key[1]:5} {label:>8} " + " ".join(f"{m:8.2f}" for m in med) + "  " + " ".join(f"{m / med[0]:6.3f}" for m in med[1:]))
    print(f"wrong: {wrong}")


main()
