#!/usr/bin/env python3
"""Writes bench/results/gpus-4.json, issue 19's summary for four GPUs, from the raw
results of the eleventh session (bench/results/raw/session11-h200x4/). Run from the
repository root."""
import json

RAW = "bench/results/raw/session11-h200x4/"
DEVICE_LINE = "4 NVIDIA H200 GPUs of one host, 64 CPU cores, 512 GiB memory, 235 GiB disk; nothing outside it can be reached from it"


def load(name):
    with open(RAW + name) as f:
        return json.load(f)


def rows(doc, timing="back-to-back"):
    out = []
    for r in doc["rows"]:
        if r.get("timing", "back-to-back") != timing:
            continue
        o, b = r["oop"], r["baseline_oop"]
        out.append({
            "function": r["function"], "bytes": r["size"],
            "time_us": round(o["time_us"], 2), "nccl_time_us": round(b["time_us"], 2),
            "time_vs_nccl": round(o["time_us"] / b["time_us"], 3),
            "busbw_vs_nccl": round(o["busbw"] / b["busbw"], 3) if b["busbw"] else None,
            "wrong_oop": o["wrong"], "wrong_ip": r["ip"]["wrong"],
        })
    return out


verify = load("verify-4gpu.json")
latency = load("verify-4gpu-latency.json")
one_gib = load("x4-1G.json")
b2b = rows(verify)
mid_large = [r for r in b2b if r["bytes"] >= 512 << 10]
small = [r for r in b2b if r["bytes"] <= 256 << 10]
graph = rows(latency, "graph")
sync = rows(latency, "sync")
summary = {
    "gpus": 4,
    "device_line": DEVICE_LINE,
    "gpu_line": "NVIDIA H200 x4, driver 580.159.04, all pairs NV18; NCCL 2.28.9 in the same process, NCCL_NVLS_ENABLE=0, no multicast object made",
    "date": verify["date"],
    "build": "e2f426c (64 channels by default, 3-/4-rank thresholds measured, two-shot 64 KiB a channel, DeviceAlloc zeroing waited for)",
    "commands": [verify["command"], latency["command"], one_gib["command"] + " (build bd97343, 48 channels)"],
    "communicator": verify["device"],
    "busbw_vs_nccl_min_512K_256M": min(min(r["busbw_vs_nccl"], 9) for r in mid_large),
    "busbw_vs_nccl_ge64M": {
        "all_reduce": verify["allreduce_busbw_vs_nccl_ge64M"],
        "all_gather": verify["allgather_busbw_vs_nccl_ge64M"],
        "reduce_scatter": verify["reducescatter_busbw_vs_nccl_ge64M"],
    },
    "busbw_vs_nccl_1G_48_channels": {r["function"]: r["busbw_vs_nccl"] for r in rows(one_gib)},
    "busbw_vs_nccl_1G_64_channels": {"all_reduce": 0.972, "all_gather": 1.018, "reduce_scatter": 1.001,
                                     "source": "x4-channels.txt, unchecked timing run, out of place"},
    "small_time_vs_nccl_le256K_worst": {
        "back_to_back": max(r["time_vs_nccl"] for r in small),
        "sync": max(r["time_vs_nccl"] for r in sync if r["bytes"] <= 256 << 10),
        "graph": max(r["time_vs_nccl"] for r in graph if r["bytes"] <= 256 << 10),
    },
    "small_time_vs_nccl_le256K_best": {
        "back_to_back": min(r["time_vs_nccl"] for r in small),
        "sync": min(r["time_vs_nccl"] for r in sync if r["bytes"] <= 256 << 10),
        "graph": min(r["time_vs_nccl"] for r in graph if r["bytes"] <= 256 << 10),
    },
    "targets": {
        "busbw_ge_1_from_512K": "not met: all_reduce 0.73 at 8 MiB, all_gather 0.90, reduce_scatter 0.86 at 8-32 MiB; 0.98-1.02 at 128 MiB",
        "small_time_le_0_5_of_nccl": "not met: back to back 0.53-0.96 of NCCL's time, synchronized 0.89-1.05, in CUDA graphs 1.56-2.36",
    },
    "checks": {
        "bench_rows_wrong": sum((r["wrong_oop"] or 0) + (r["wrong_ip"] or 0) for r in b2b + sync + graph),
        "matrix_default_stream_4_ranks": "1614 cases, 0 wrong (build bd97343)",
        "matrix_nvls_twin_4_ranks": "1204 cases, 0 wrong (build 288631e)",
        "matrix_one_shot_4_ranks": "619 cases, 0 wrong (build 288631e)",
        "matrix_two_shot_4_ranks": "247 cases, 0 wrong (build 288631e)",
        "matrix_8_ranks_two_a_gpu_stream": "first 800 of 1616 cases, 0 wrong (150 s limit; build e2f426c)",
        "bench_8_ranks_two_a_gpu": "every row 8 B - 16 MiB checked, 0 wrong (build e2f426c)",
        "shmem": "shift --check-api and jacobi as 4 PEs in 4 processes, one a GPU, and shift as 4 PEs in one process: passed (build 288631e)",
        "self_tests": "19 passed, 0 failed on device 0 (build e2f426c)",
    },
    "footprint_device0_idle": {k: load("verify-footprint.json")[f"idle_{k}_ratio"] for k in ("fma", "copy", "gemm")},
    "rows_back_to_back": b2b,
    "rows_sync": sync,
    "rows_graph": graph,
}
with open("bench/results/gpus-4.json", "w") as f:
    json.dump(summary, f, indent=1)
    f.write("\n")
