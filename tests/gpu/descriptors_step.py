"""A PyTorch program that takes over descriptors it did not open, for rtrace's GPU proof: after
CUDA's start and some work it opens a file of its own, writes a line, and puts that file at the
number of every descriptor open on a file named `*.bin` (a tracer's trace, when traced: what a
program closing every descriptor it did not open and then opening its own files gets), then
trains on. A tracer writing through the old number would write into the program's file.

Prints deterministic lines only and ends with "descriptors: OK"; exits non-zero on failure
(the program's file holding anything but its line included).
"""

import os
import sys
import tempfile
import time

import torch


def bin_descriptors():
    """The descriptors open on files whose name ends in `.bin`."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target.endswith(".bin"):
            found.append(int(name))
    return sorted(found)


def train(model, opt, x, y, steps):
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    return loss


def main() -> int:
    if not torch.cuda.is_available():
        print("descriptors: CUDA not available", file=sys.stderr)
        return 1
    torch.manual_seed(0)
    dev = torch.device("cuda:0")
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 128), torch.nn.Tanh(), torch.nn.Linear(128, 1)
    ).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(256, 64, device=dev)
    y = x[:, :1] * 0.5
    first = train(model, opt, x, y, 50).item()

    own_dir = tempfile.mkdtemp(prefix="descriptors-")
    path = os.path.join(own_dir, "own.txt")
    mine = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(mine, b"the program's own line\n")
    taken = bin_descriptors()
    for fd in taken:
        os.dup2(mine, fd, inheritable=False)
    # Training goes on while the tracer's worker flushes (every few ms) and CUPTI hands its
    # buffers back.
    for _ in range(5):
        last = train(model, opt, x, y, 100)
        torch.cuda.synchronize()
        time.sleep(0.05)
    for fd in taken + [mine]:
        os.close(fd)
    with open(path, "rb") as f:
        content = f.read()
    os.remove(path)
    os.rmdir(own_dir)
    if content != b"the program's own line\n":
        print(f"descriptors: the program's file holds {len(content)} bytes: {content[:60]!r}")
        return 1
    final = last.item()
    if not final < first:
        print(f"descriptors: the loss did not fall ({first:.4f} -> {final:.4f})")
        return 1
    print("descriptors: the program's file holds its own line")
    print("descriptors: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
