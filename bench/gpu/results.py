#!/usr/bin/env python3
"""Turns raw output of `ferroccl bench` (and of `jacobi`) into the result files of
bench/results/, each carrying what it measures, the command, the device line, the date,
the build, its same-run baseline and the raw file it came from. Used by bench/gpu/*.sh.

  results.py ring RAW.json OUT.json KEY=VALUE...      back-to-back rows, bandwidth fields
  results.py latency RAW.json OUT.json KEY=VALUE...   rows up to 1 MiB, small-call fields
  results.py annotate OUT.json RAW.json [RAW2.json...] KEY=VALUE...
                                                      RAW's body (the first process); the
                                                      others under `other_processes`
  results.py nvls NVLS.json RING.json AUTO.json OUT.json KEY=VALUE...
  results.py jacobi OUT.json LOG.txt [NAME:LOG.txt...] KEY=VALUE...
                                                      step times and error lines of the
                                                      first log; each NAME:LOG under NAME
  results.py matmul RAW.txt OUT.json GPUS KEY=VALUE...
                                                      ferroccl-matmul's JSON lines (the
                                                      slowest rank per run) against
                                                      matmul_torch.py's baseline lines
  results.py compare DIR NAME BUILD [BUILD...]        A/B table of bench text output
                                                      DIR/NAME-BUILD-ROUND.txt: per row the
                                                      median over rounds of the mean of out
                                                      of place and in place, µs per call

KEY=VALUE pairs are the metadata (command, device, date, build, baseline, raw, note, ...);
a VALUE that parses as JSON is stored as JSON.
"""
import glob
import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

LATENCY_MAX = 1 << 20  # latency files keep every timing's rows up to here
LARGE = 64 << 20       # the *_ge64M fields: sizes from here


def meta(pairs):
    out = {}
    for p in pairs:
        k, _, v = p.partition("=")
        try:
            out[k] = json.loads(v)
        except ValueError:
            out[k] = v
    return out


def split_pairs(args):
    """Positional arguments, then KEY=VALUE pairs (a positional never holds '=' before a '/')."""
    pos = [a for a in args if not re.match(r"^[A-Za-z_][A-Za-z_0-9]*=", a)]
    return pos, [a for a in args if a not in pos]


def load(path):
    return json.loads(Path(path).read_text())


def write(path, obj):
    Path(path).write_text(json.dumps(obj, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {path}")


def fields(d, names):
    return {k: d[k] for k in names if k in d}


def head(d, pairs):
    return {"command": d["command"], "communicator": d["device"], "date": d["date"], **meta(pairs)}


def timing(r):
    return r.get("timing", "back-to-back")  # the oldest sweeps name no timing: back to back


def ring(raw, out, *pairs):
    d = load(raw)
    write(out, {
        "measures": "bus bandwidth by size, calls back to back (nccl-tests' way), against the baseline in the same run (each row the median of its rounds, the two taking turns; the baseline's fastest mode per row); the *_ge64M fields are the smallest ours/baseline busbw ratio from 64 MiB, busbw_vs_nccl_min_512K_1G the smallest from 512 KiB",
        **head(d, pairs),
        **fields(d, ["busbw_vs_nccl_min_512K_1G", "allreduce_busbw_vs_nccl_ge64M",
                     "allgather_busbw_vs_nccl_ge64M", "reducescatter_busbw_vs_nccl_ge64M"]),
        "rows": [r for r in d["rows"] if timing(r) == "back-to-back"],
    })


def latency(raw, out, *pairs):
    d = load(raw)
    write(out, {
        "measures": "time per call of collectives up to 1 MiB, back to back, each call synchronized, and in CUDA graphs of 20 calls, against the baseline in the same run (each row the median of its rounds, the two taking turns; the baseline's fastest mode per row); the small_* fields are the worst ours/baseline time ratio over the sizes up to 256 KiB, allreduce_graph_*_us our all_reduce per call in a graph",
        **head(d, pairs),
        **fields(d, ["small_time_vs_nccl_le256K", "small_sync_time_vs_nccl_le256K",
                     "small_graph_time_vs_nccl_le256K", "allreduce_graph_8B_us",
                     "allreduce_graph_256K_us"]),
        "rows": [r for r in d["rows"] if r["size"] <= LATENCY_MAX],
    })


def annotate(out, *args):
    raws, pairs = split_pairs(args)
    first = load(raws[0])
    m = meta(pairs)
    m.setdefault("date", first.get("date") or first.get("date_utc"))
    res = {**m, **{k: v for k, v in first.items() if k not in m}}
    if len(raws) > 1:
        res["other_processes"] = [load(r) for r in raws[1:]]
    write(out, res)


def best(side):
    ts = [side[k]["time_us"] for k in ("oop", "ip") if side.get(k) and side[k].get("time_us")]
    return min(ts) if ts else None


def nvls(nvls_raw, ring_raw, auto_raw, out, *pairs):
    runs = {name: load(p) for name, p in (("nvls", nvls_raw), ("ring", ring_raw), ("auto", auto_raw))}
    t = {}  # (algo, function, size) -> ours, baseline: the faster of out of place and in place
    for algo, d in runs.items():
        for r in d["rows"]:
            if timing(r) == "back-to-back":
                t[(algo, r["function"], r["size"])] = (
                    best(r), best({"oop": r.get("baseline_oop"), "ip": r.get("baseline_ip")}))
    ratio = lambda x, y: round(x / y, 3) if x and y else None
    per = {}
    for (_, fn, size) in sorted((k for k in t if k[0] == "nvls"), key=lambda k: (k[1], k[2])):
        n, nb = t[("nvls", fn, size)]
        r, rb = t.get(("ring", fn, size), (None, None))
        a, ab = t.get(("auto", fn, size), (None, None))
        p = per.setdefault(fn, {k: {} for k in ("nvls_vs_ring", "nvls_vs_nccl", "ring_vs_nccl", "auto_vs_nccl", "nvls_vs_auto")})
        p["nvls_vs_ring"][str(size)] = ratio(r, n)
        p["nvls_vs_nccl"][str(size)] = ratio(nb, n)
        p["ring_vs_nccl"][str(size)] = ratio(rb, r)
        p["auto_vs_nccl"][str(size)] = ratio(ab, a)
        p["nvls_vs_auto"][str(size)] = ratio(a, n)

    def ge64(fn, key):
        v = [x for s, x in per.get(fn, {}).get(key, {}).items() if int(s) >= LARGE and x is not None]
        return min(v) if v else None

    wrong = sum(1 for d in runs.values() for r in d["rows"] for k in ("oop", "ip") if r.get(k) and r[k].get("wrong"))
    write(out, {
        "measures": "NVLS collectives against the ring, the automatic choice and the baseline, one process per algorithm (the baseline measured first in each); per_size ratios are the other's time over ours, back to back, the faster of out of place and in place on each side (the same as busbw ratios); the *_ge64M fields their smallest from 64 MiB",
        **meta(pairs),
        "date": runs["nvls"]["date"],
        "communicator": runs["nvls"]["device"],
        "command": "; ".join(d["command"] for d in runs.values()),
        "nvls_allreduce_vs_ring_ge64M": ge64("all_reduce", "nvls_vs_ring"),
        "nvls_allreduce_vs_nccl_ge64M": ge64("all_reduce", "nvls_vs_nccl"),
        "nvls_reducescatter_vs_nccl_ge64M": ge64("reduce_scatter", "nvls_vs_nccl"),
        "nvls_allgather_vs_nccl_ge64M": ge64("all_gather", "nvls_vs_nccl"),
        "nvls_allgather_vs_ring_ge64M": ge64("all_gather", "nvls_vs_ring"),
        "wrong": wrong,
        "per_size": per,
    })


EXPECTED_ERRORS = {0: "0.00272958", 10: "0.00034546", 20: "0.000210903", 30: "0.000157015",
                   40: "0.000127122", 50: "0.00010783"}


def jacobi_log(path):
    text = Path(path).read_text()
    res = {}
    m = re.search(r"step kernel on PE 0 \((?P<points>\d+) points, (?P<threads>\d+)-thread blocks, mean of "
                  r"(?P<steps>\d+) steps\): atomic (?P<atomic>[\d.]+) ms, block_reduce (?P<block>[\d.]+) ms, "
                  r"block_reduce_speedup (?P<speedup>[\d.]+)", text)
    if m:
        res.update({"points": int(m["points"]), "threads_per_block": int(m["threads"]),
                    "steps_timed": int(m["steps"]), "step_atomic_ms": float(m["atomic"]),
                    "step_block_reduce_ms": float(m["block"]), "block_reduce_speedup": float(m["speedup"])})
    printed = [(int(i), e) for i, e in re.findall(r"Iteration = (\d+) error = (\S+)", text)]
    res["runs_succeeded"] = text.count("Success!")
    res["runs_failed"] = text.count("Failure!")
    res["error_lines_match"] = bool(printed) and all(EXPECTED_ERRORS.get(i) == e for i, e in printed)
    return res


def jacobi(out, *args):
    logs, pairs = split_pairs(args)
    res = {
        "measures": "the Jacobi solver on the symmetric heap: the block-reduce step kernel against the same solver's one-float-atomic-per-point step kernel (the baseline, same process), and every run's printed error lines against the reference table",
        **meta(pairs),
        **jacobi_log(logs[0]),
    }
    for named in logs[1:]:
        k, _, path = named.partition(":")
        res[k] = jacobi_log(path)
    write(out, res)


def matmul(raw, out, gpus, *pairs):
    ours, base = {}, {}
    for line in open(raw, errors="replace"):
        line = line.strip()
        if not line.startswith("{"):
            continue
        row = json.loads(line)
        shape = (row["m"], row["k"], row["n"])
        if "baseline" in row:
            base[shape] = row
            continue
        # The slowest rank's time is the call's.
        key = (row["collective"], row["copies"], row.get("pieces", 1)) + shape
        if key not in ours or row["time_us"] > ours[key]["time_us"]:
            ours[key] = row
    rows = []
    # The gathered GEMM alone, as ferroccl-matmul --gemm-alone timed it (cuBLASLt), by shape.
    own_alone = {(m, k, n): r["gemm_alone_us"] for (_, _, _, m, k, n), r in ours.items() if r.get("gemm_alone_us")}
    for (c, copies, pieces, m, k, n), row in sorted(ours.items()):
        if int(gpus) == 1:
            # Every rank on the one GPU: NCCL's baselines ran one rank (nothing to
            # compare), and the floor is every rank's GEMM of the gathered shape one after
            # another on that GPU; tc_util counts all of the ranks' FLOPs.
            alone = own_alone.get((m, k, n))
            floor = alone * row["nranks"] if alone else None
            rows.append({"collective": c, "copies": copies, "pieces": pieces, "gpus": 1, "ranks": row["nranks"], "m": m, "k": k, "n": n,
                         "time_us": row["time_us"], "host_us": row.get("host_us"), "tc_util_of_the_gpu": row["tc_util"] * row["nranks"],
                         "gemm_alone_us": alone, "vs_ranks_gemms_in_series": row["time_us"] / floor if floor else None,
                         "max_error_in_eps": row["max_error_in_eps"]})
            continue
        b = base.get((m, k, n), {})
        against = b.get("gemm_then_reduce_scatter_us" if c == "reducescatter" else "all_gather_then_gemm_us")
        # The floor: the faster of cuBLAS alone (torch.matmul) and cuBLASLt alone
        # (ferroccl-matmul --gemm-alone) on the gathered shape, same data distribution.
        alones = {"cublas": b.get("gemm_alone_us"), "cublaslt": own_alone.get((m, k, n))}
        alone = min((x for x in alones.values() if x), default=None)
        # The ring's own floor: its D steps' GEMMs of one shard's shape in series.
        ring_floor = b["gemm_shard_us"] * int(gpus) if b.get("gemm_shard_us") else None
        rows.append({"collective": c, "copies": copies, "pieces": pieces, "gpus": int(gpus), "m": m, "k": k, "n": n,
                     "time_us": row["time_us"], "host_us": row.get("host_us"), "tc_util": row["tc_util"],
                     "vs_nccl_cublas": against / row["time_us"] if against else None,
                     "vs_gemm_alone": row["time_us"] / alone if alone else None,
                     "vs_ring_floor": row["time_us"] / ring_floor if ring_floor else None,
                     "nccl_cublas_us": against, "gemm_alone_us": alone, "gemm_alone_cublas_us": alones["cublas"],
                     "gemm_alone_cublaslt_us": alones["cublaslt"], "ring_floor_us": ring_floor,
                     "max_error_in_eps": row["max_error_in_eps"]})
    measures = ("ferroccl's collective matmuls (cuBLASLt GEMMs; the ring's copies by the copy engines, or by SMs) against "
                "NCCL + cuBLAS and the faster of cuBLAS and cuBLASLt alone on the gathered shape (gemm_alone_us), one process per GPU, "
                "normal data on both sides; tc_util = useful FLOPs / (time x dense peak); "
                "ring_floor_us = GPUs x cuBLAS alone on one shard's shape (the ring's GEMMs in series, no communication); "
                "pieces = the row ranges each reduce-scatter block is computed and sent in (docs/matmul.md)")
    if int(gpus) == 1:
        measures = ("ferroccl's collective matmuls with every rank on one GPU (one process): the results checked and what the "
                    "ring costs on top of the ranks' GEMMs; not the overlap of communication, which needs a GPU per rank. "
                    "tc_util_of_the_gpu = every rank's useful FLOPs / (time x dense peak); vs_ranks_gemms_in_series = time / "
                    "(ranks x cuBLASLt's GEMM of the gathered shape alone)")
    fields = meta(pairs)
    if int(gpus) == 1:
        fields["baseline"] = ("ferroccl-matmul --gemm-alone: cuBLASLt's GEMM of the gathered shape alone on the same GPU, "
                              "same run, once per rank (NCCL's baselines need a GPU per rank)")
    write(out, {"measures": measures, **fields, "rows": rows})


def parse_table(path):
    rows, function, tm = [], None, None
    for line in open(path):
        m = re.match(r"# ferroccl (\w+) on", line)
        if m:
            function = m.group(1)
        if "back to back" in line:
            tm = "b2b"
        elif "waited for" in line and line.startswith("#"):
            tm = "sync"
        elif "CUDA graph" in line:
            tm = "graph"
        f = line.split()
        if not line.startswith("#") and len(f) >= 13 and f[0].isdigit():
            wrong = sum(int(x) for x in (f[8], f[12]) if x.isdigit())
            rows.append(((function, tm, int(f[0])), (float(f[5]) + float(f[9])) / 2, wrong))
    return rows


def compare(d, name, *builds):
    times = defaultdict(lambda: defaultdict(list))
    wrong = 0
    for b in builds:
        for path in sorted(glob.glob(f"{d}/{name}-{b}-*.txt")):
            for key, t, w in parse_table(path):
                times[key][b].append(t)
                wrong += w
    print(f"{name}: " + " | ".join(builds) + " | " + " | ".join(f"{b}/{builds[0]}" for b in builds[1:]))
    for key in times:
        med = [statistics.median(times[key][b]) if times[key][b] else float("nan") for b in builds]
        size = key[2]
        label = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB" if size >= 1 << 10 else f"{size} B"
        print(f"{key[0]:15} {key[1]:5} {label:>8} " + " ".join(f"{m:8.2f}" for m in med) + "  "
              + " ".join(f"{m / med[0]:6.3f}" for m in med[1:]))
    print(f"wrong: {wrong}")


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in ("ring", "latency", "annotate", "nvls", "jacobi", "matmul", "compare"):
        sys.exit(__doc__)
    {"ring": ring, "latency": latency, "annotate": annotate, "nvls": nvls, "jacobi": jacobi,
     "matmul": matmul, "compare": compare}[sys.argv[1]](*sys.argv[2:])
