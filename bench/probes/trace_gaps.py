#!/usr/bin/env python3
"""What a kernel_trace.cpp timeline says per stream (bench/probes/README.md): each stream's
operations in order, the gap between one operation's end and the next one's start, grouped
by the pair of operations (median, 10th and 90th percentile, in µs), and how busy the
stream was from its first operation to its last. GEMM kernels (cuBLASLt's) are named
`gemm`, others by their (shortened) kernel name, copies by kind and size. Driver calls
(recorded with KERNEL_TRACE_DRIVER=1) are summed by function: the host's time per call of
each, and in all."""
import argparse
import collections
import csv
import statistics


def label(row):
    if row["kind"] == "kernel":
        name = row["name"]
        return "gemm" if "gemm" in name.lower() or "xmma" in name.lower() else name[:48]
    if row["kind"] in ("memcpy", "memset"):
        return f'{row["kind"]} {int(row["bytes"]) >> 10} KiB'
    return row["kind"]


def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("trace", nargs="+", help="kernel_trace CSV files (one per process)")
    p.add_argument("--skip", type=int, default=0, help="operations to skip at each stream's start (warm-up)")
    args = p.parse_args()
    streams = collections.defaultdict(list)
    driver = collections.defaultdict(list)
    for path in args.trace:
        with open(path) as f:
            for row in csv.DictReader(f):
                if row["kind"] == "dropped":
                    print(f"{path}: {row['bytes']} records dropped")
                    continue
                if row["kind"] == "driver":
                    driver[row["name"]].append((int(row["end_ns"]) - int(row["start_ns"])) / 1e3)
                    continue
                key = (path.rsplit(".", 1)[-1], row["device"], row["stream"])
                streams[key].append((int(row["start_ns"]), int(row["end_ns"]), label(row)))
    for key in sorted(streams):
        ops = sorted(streams[key])[args.skip:]
        if len(ops) < 2:
            continue
        pid, device, stream = key
        span = ops[-1][1] - ops[0][0]
        busy = sum(e - s for s, e, _ in ops)
        kinds = collections.Counter(l for _, _, l in ops)
        print(f"process {pid} device {device} stream {stream}: {len(ops)} operations over {span / 1e3:.1f} us, busy {busy / max(span, 1):.3f}")
        for l, n in kinds.most_common():
            durs = [(e - s) / 1e3 for s, e, x in ops if x == l]
            print(f"  {n:6d} x {l}: median {statistics.median(durs):.2f} us")
        gaps = collections.defaultdict(list)
        for (s0, e0, l0), (s1, e1, l1) in zip(ops, ops[1:]):
            gaps[(l0, l1)].append((s1 - e0) / 1e3)
        for (l0, l1), g in sorted(gaps.items(), key=lambda kv: -len(kv[1])):
            print(f"  gap {l0} -> {l1}: n {len(g)}, median {statistics.median(g):.2f} us, p10 {quantile(g, 0.1):.2f}, p90 {quantile(g, 0.9):.2f}")
    if driver:
        total = sum(sum(t) for t in driver.values())
        print(f"driver calls: {sum(len(t) for t in driver.values())}, {total / 1e3:.1f} ms of host time in all")
        for name, t in sorted(driver.items(), key=lambda kv: -sum(kv[1])):
            print(f"  {name}: {len(t)} calls, {sum(t) / 1e3:.2f} ms, median {statistics.median(t):.2f} us")


if __name__ == "__main__":
    main()
