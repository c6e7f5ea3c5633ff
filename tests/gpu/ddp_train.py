# A small DDP training job for tests/gpu/ddp_check.sh (issue 23): run with
#   torchrun --standalone --nproc-per-node=N tests/gpu/ddp_train.py
# One process per GPU, NCCL. Each step is an NVTX range `train_step` around the host part of
# forward, backward (DDP's all-reduce launched from its hooks) and the optimizer step; the
# loss is read after the range, which waits for the GPU. The rank SLOW_RANK (default: none)
# sleeps SLOW_MS (default 20) ms inside its range before the forward pass, so it reaches each
# all-reduce last: a straggler. STEPS (default 30) steps after 5 warm-up ones (not in ranges).
# Each rank prints one JSON line: rank, world size, device, its step-range durations (ms,
# measured around the same code as the range) and per-step wall times, and its last loss.
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024)).cuda()
    ddp = DDP(model, device_ids=[local])
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    gen = torch.Generator(device="cuda").manual_seed(1000 + rank)
    x = torch.randn(512, 1024, device="cuda", generator=gen)
    y = torch.randn(512, 1024, device="cuda", generator=gen)
    slow = int(os.environ.get("SLOW_RANK", "-1"))
    sleep_s = float(os.environ.get("SLOW_MS", "20")) / 1000.0
    steps = int(os.environ.get("STEPS", "30"))

    def step():
        out = ddp(x)
        loss = nn.functional.mse_loss(out, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    for _ in range(5):
        step().item()
    dist.barrier()
    torch.cuda.synchronize()
    ranges, walls, loss = [], [], None
    for _ in range(steps):
        t0 = time.perf_counter()
        torch.cuda.nvtx.range_push("train_step")
        if rank == slow:
            time.sleep(sleep_s)
        loss = step()
        torch.cuda.nvtx.range_pop()
        t1 = time.perf_counter()
        value = loss.item()
        walls.append((time.perf_counter() - t0) * 1e3)
        ranges.append((t1 - t0) * 1e3)
    print(json.dumps({"rank": rank, "world": world, "device": local, "range_ms": ranges,
                      "wall_ms": walls, "loss": round(value, 6)}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
