"""A PyTorch training loop as people write it, for rtrace's GPU proof: a small convolutional
network (cuDNN's kernels) trained under autocast (bfloat16) from a DataLoader with two
worker processes (forked from the traced process after CUDA is initialised) and pinned
memory (its pin-memory thread copies batches into page-locked buffers), the batches copied
to the GPU without blocking; then an evaluation pass.

Prints deterministic lines only and ends with "loader: OK"; exits non-zero on failure.
"""

import sys

import torch
from torch.utils.data import DataLoader, Dataset


class Shapes(Dataset):
    """Images of 1x16x16 whose label is the quadrant holding the brightest pixel."""

    def __init__(self, n):
        g = torch.Generator().manual_seed(0)
        self.x = torch.rand(n, 1, 16, 16, generator=g) * 0.2
        self.y = torch.randint(0, 4, (n,), generator=g)
        for i in range(n):
            r, c = divmod(int(self.y[i]), 2)
            self.x[i, 0, r * 8 + 3, c * 8 + 3] = 1.0

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def main() -> int:
    if not torch.cuda.is_available():
        print("loader: CUDA not available", file=sys.stderr)
        return 1
    dev = torch.device("cuda:0")
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 8, 3, padding=1),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(8, 16, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(16 * 4 * 4, 4),
    ).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    loader = DataLoader(Shapes(512), batch_size=64, shuffle=True, num_workers=2, pin_memory=True,
                        generator=torch.Generator().manual_seed(1))
    first = last = None
    for epoch in range(4):
        total = 0.0
        for x, y in loader:
            x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.item()
        first = total if first is None else first
        last = total
    if not last < first:
        print(f"loader: loss did not decrease ({first} -> {last})", file=sys.stderr)
        return 1
    print(f"loader: 4 epochs of {len(loader)} batches from 2 workers, loss decreased")
    model.eval()
    right = 0
    with torch.no_grad():
        for x, y in DataLoader(Shapes(256), batch_size=128, num_workers=2, pin_memory=True):
            right += int((model(x.to(dev)).argmax(1).cpu() == y).sum())
    # Chance is a quarter (64).
    if right <= 96:
        print(f"loader: {right} of 256 right after training", file=sys.stderr)
        return 1
    print("loader: evaluated, better than chance")
    print("loader: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
