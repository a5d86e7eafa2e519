"""The baselines of the collective matmuls, under torchrun (one process per GPU, NCCL):
NCCL's all-gather then cuBLAS (torch.matmul), cuBLAS then NCCL's reduce-scatter, cuBLAS
alone on the gathered shape (no communication: the floor of any design), and cuBLAS alone
on one shard's shape (M x K times K x N: a ring of D steps runs D of these one after
another, so D times it is the floor of the ring's design). Prints one JSON object per
shape from rank 0.

usage: torchrun --nproc-per-node N matmul_torch.py DTYPE ITERS WARMUP M,K,N [M,K,N ...]
"""
import json
import os
import sys

import torch
import torch.distributed as dist


def timed(fn, iters, warmup):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    dist.barrier()
    # Calls queued before the start event, not waited for: the GPU is busy when the clock
    # starts, so the host's time to enqueue the first call is not counted (as ferroccl-matmul
    # times its calls).
    for _ in range(warmup):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    us = torch.tensor([start.elapsed_time(end) * 1e3 / iters], device="cuda")
    dist.all_reduce(us, op=dist.ReduceOp.MAX)
    return us.item()


def main():
    dtype = {"f16": torch.float16, "bf16": torch.bfloat16}[sys.argv[1]]
    iters, warmup = int(sys.argv[2]), int(sys.argv[3])
    dist.init_process_group("nccl")
    rank, d = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    gen = torch.Generator(device="cuda").manual_seed(rank)
    for shape in sys.argv[4:]:
        m, k, n = (int(x) for x in shape.split(","))
        a = torch.randn(m, k, device="cuda", dtype=dtype, generator=gen)
        b = torch.randn(k, n, device="cuda", dtype=dtype, generator=gen)
        full = torch.empty(d * m, k, device="cuda", dtype=dtype)
        rows = {}

        def gather_then_gemm():
            dist.all_gather_into_tensor(full, a)
            return full @ b

        a_rs = torch.randn(d * m, k, device="cuda", dtype=dtype, generator=gen)
        out = torch.empty(m, n, device="cuda", dtype=dtype)

        def gemm_then_scatter():
            dist.reduce_scatter_tensor(out, a_rs @ b)

        rows["all_gather_then_gemm_us"] = timed(gather_then_gemm, iters, warmup)
        rows["gemm_then_reduce_scatter_us"] = timed(gemm_then_scatter, iters, warmup)
        rows["gemm_alone_us"] = timed(lambda: full @ b, iters, warmup)
        rows["gemm_shard_us"] = timed(lambda: a @ b, iters, warmup)
        if rank == 0:
            print(json.dumps({"baseline": "torch.distributed NCCL + torch.matmul (cuBLAS)", "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                              "dtype": sys.argv[1], "nranks": d, "m": m, "k": k, "n": n, "iters": iters, **rows}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
