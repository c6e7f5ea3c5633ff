"""A PyTorch training step for measuring PC sampling's cost (tests/gpu/pcsamp_check.sh).

Trains a small convolutional network on random data: 20 warm-up steps, then STEPS timed steps
(default 150), the GPU synchronized before and after. Prints "ms_per_step <ms>" on stdout.
"""

import sys
import time

import torch


def main() -> int:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 150
    dev = torch.device("cuda:0")
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 64, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(8), torch.nn.Flatten(),
        torch.nn.Linear(64 * 64, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10),
    ).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(64, 3, 64, 64, device=dev)
    y = torch.randint(0, 10, (64,), device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    for _ in range(20):
        step()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    print(f"ms_per_step {(time.perf_counter() - t) * 1e3 / steps:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
