"""torch.distributed on the NCCL backend, every result checked: run it with
`torchrun --nproc-per-node N bench/gpu/torch_nccl.py` once on NVIDIA's NCCL and once with
ferroccl's libnccl.so.2 preloaded (LD_PRELOAD), and compare the two outputs. Each rank
prints one line per operation, `op: ok` or `op: WRONG ...`, and exits 1 if any is wrong.

Operations: all_reduce (sum, avg, max), all_gather_into_tensor (float32, and float8_e4m3fn
as float8 training gathers its weights), reduce_scatter_tensor,
broadcast, send/recv around a ring, all_to_all_single, gather, scatter, a new_group of the
even ranks, and an all_reduce captured in a CUDA graph and replayed."""

import os
import sys

import torch
import torch.distributed as dist


def main() -> int:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    dist.init_process_group("nccl", device_id=dev)
    wrong = []

    def check(name, got, want):
        ok = torch.equal(got.cpu(), want.cpu())
        print(f"rank {rank}: {name}: {'ok' if ok else 'WRONG'}", flush=True)
        if not ok:
            wrong.append(name)

    n = 1 << 16
    base = torch.arange(n, dtype=torch.float32, device=dev) % 1000

    def mine(r):
        return base + r * 1000

    x = mine(rank).clone()
    dist.all_reduce(x)
    check("all_reduce sum", x, sum(mine(r) for r in range(world)))
    x = mine(rank).clone()
    dist.all_reduce(x, op=dist.ReduceOp.MAX)
    check("all_reduce max", x, mine(world - 1))
    x = (torch.ones(n, device=dev) * (rank + 1) * world).clone()
    dist.all_reduce(x, op=dist.ReduceOp.AVG)
    check("all_reduce avg", x, torch.ones(n, device=dev) * sum(range(1, world + 1)))

    out = torch.empty(world * n, device=dev)
    dist.all_gather_into_tensor(out, mine(rank))
    check("all_gather_into_tensor", out, torch.cat([mine(r) for r in range(world)]))

    def mine8(r):
        return (mine(r) % 256).to(torch.float8_e4m3fn)

    out8 = torch.empty(world * n, dtype=torch.float8_e4m3fn, device=dev)
    dist.all_gather_into_tensor(out8, mine8(rank))
    check("all_gather_into_tensor float8_e4m3fn", out8.view(torch.uint8), torch.cat([mine8(r) for r in range(world)]).view(torch.uint8))

    whole = torch.cat([mine(rank) + b for b in range(world)])
    part = torch.empty(n, device=dev)
    dist.reduce_scatter_tensor(part, whole)
    check("reduce_scatter_tensor", part, sum(mine(r) + rank for r in range(world)))

    x = mine(rank).clone()
    dist.broadcast(x, src=world - 1)
    check("broadcast", x, mine(world - 1))

    if world > 1:
        got = torch.empty(n, device=dev)
        ops = [dist.P2POp(dist.isend, mine(rank), (rank + 1) % world), dist.P2POp(dist.irecv, got, (rank - 1) % world)]
        for req in dist.batch_isend_irecv(ops):
            req.wait()
        check("send/recv ring", got, mine((rank - 1) % world))

    src = torch.cat([mine(rank) + b for b in range(world)])
    out = torch.empty(world * n, device=dev)
    dist.all_to_all_single(out, src)
    check("all_to_all_single", out, torch.cat([mine(j) + rank for j in range(world)]))

    gathered = [torch.empty(n, device=dev) for _ in range(world)] if rank == 0 else None
    dist.gather(mine(rank), gather_list=gathered, dst=0)
    if rank == 0:
        check("gather to rank 0", torch.cat(gathered), torch.cat([mine(r) for r in range(world)]))
    got = torch.empty(n, device=dev)
    dist.scatter(got, scatter_list=[mine(0) + r for r in range(world)] if rank == 0 else None, src=0)
    check("scatter from rank 0", got, mine(0) + rank)

    evens = list(range(0, world, 2))
    group = dist.new_group(evens)
    if rank in evens:
        x = mine(rank).clone()
        dist.all_reduce(x, group=group)
        check("new_group all_reduce", x, sum(mine(r) for r in evens))

    x = mine(rank).clone()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        dist.all_reduce(x)  # warm-up outside the graph, as PyTorch asks
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            dist.all_reduce(x)
    torch.cuda.current_stream().wait_stream(stream)
    x.copy_(mine(rank))
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    # Replay 1 sums every rank's input; 2 and 3 each multiply that by the world size.
    check("all_reduce in a CUDA graph (3 replays)", x, sum(mine(r) for r in range(world)) * world**2)

    dist.destroy_process_group()
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
