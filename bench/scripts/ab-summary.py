#!/usr/bin/env python3
"""A/B summary of `ferroccl bench --json` files of two builds measured in one device call.

Usage: ab-summary.py DIR A B [ROUNDS]  (reads DIR/A-r0.json .. DIR/A-r{ROUNDS-1}.json and
the same of B). Each row: the minimum over rounds of the smaller of the out-of-place and
in-place times, for A and B; NCCL's (the same minimum over both builds' runs); B/A and
B/NCCL; the wrong-result count of every run.
"""
import json
import sys
from collections import defaultdict


def load(path):
    return json.load(open(path))["rows"]


def main():
    d, a, b = sys.argv[1:4]
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    best = defaultdict(dict)
    nccl = {}
    wrong = defaultdict(int)
    for v in (a, b):
        for r in range(rounds):
            for row in load(f"{d}/{v}-r{r}.json"):
                key = (row["timing"], row["function"], row["bytes"])
                t = min(row["oop"]["time_us"], row["ip"]["time_us"])
                best[key][v] = min(best[key].get(v, t), t)
                bl = [x["time_us"] for x in (row.get("baseline_oop"), row.get("baseline_ip")) if x]
                if bl:
                    nccl[key] = min([nccl.get(key, min(bl))] + bl)
                wrong[key] += row["oop"]["wrong"] + row["ip"]["wrong"]
    print(f"timing function bytes | {a} {b} (µs, min of out/in place over {rounds} rounds) | NCCL | {b}/{a} | {b}/NCCL | wrong")
    for key in sorted(best):
        ta, tb = best[key][a], best[key][b]
        n = nccl.get(key, float("nan"))
        print(f"{key[0]} {key[1]} {key[2]} | {ta:.2f} {tb:.2f} | {n:.2f} | {tb / ta:.3f} | {tb / n:.2f} | {wrong[key]}")


main()
