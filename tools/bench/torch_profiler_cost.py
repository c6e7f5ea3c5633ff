"""The PyTorch profiler's cost on a launch-bound loop, and CUPTI's kernel timestamps.

Prints µs per `x.add_(1)` untraced and under torch.profiler (CUDA activities), alternating.
    python3 tools/bench/torch_profiler_cost.py [ops] [reps]
"""
import statistics
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

ops = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
x = torch.zeros(1, device="cuda")


def loop():
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(ops):
        x.add_(1)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / ops * 1e6


for _ in range(3):
    loop()
plain, prof = [], []
for _ in range(reps):
    plain.append(loop())
    with profile(activities=[ProfilerActivity.CUDA]):
        prof.append(loop())
p, q = statistics.median(plain), statistics.median(prof)
print(f"add_ loop: untraced {p:.3f} us/op, profiler {q:.3f} us/op, profiler adds {q - p:.3f} us/op")
