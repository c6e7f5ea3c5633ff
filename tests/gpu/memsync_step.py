"""A PyTorch loop that allocates, frees and synchronizes, for tests/gpu/memsync_check.py.

Each iteration allocates a tensor of 1 to 16 MiB (the caching allocator asks the driver for
new segments as sizes grow), reads a sum back with .item() (a copy and a stream
synchronize), and calls torch.cuda.synchronize() (a context synchronize); every fifth,
torch.cuda.empty_cache() gives the cached segments back (frees). Prints one line:
`total T syncs N max_reserved B`, the same traced or not.
"""

import sys

import torch


def main():
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    dev = torch.device("cuda")
    total, syncs = 0.0, 0
    for i in range(iters):
        x = torch.ones((1 << (18 + i % 5),), device=dev)
        total += (x * 2).sum().item()
        torch.cuda.synchronize()
        syncs += 1
        if i % 5 == 4:
            del x
            torch.cuda.empty_cache()
    print(f"total {total:.1f} syncs {syncs} max_reserved {torch.cuda.max_memory_reserved()}")


if __name__ == "__main__":
    main()
