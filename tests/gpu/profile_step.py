"""A PyTorch training step for kernel profiling's cost (tests/gpu/profile_check.sh, part `cost`):
a small convolutional net, forward, backward and an SGD step, STEPS times (argv[1], default 1);
with argv[2] "range", each step between cudaProfilerStart and cudaProfilerStop (a capture range
for range mode, `rtrace record --replay application --capture-range cudaProfilerApi`).
Prints deterministic lines only (the loss rounded) and "profile_step: OK"; exits non-zero on
failure. Every kernel of it is profiled by rtrace (Speed Of Light) and by `ncu --set basic`.
"""

import sys

import torch


def main() -> int:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    ranges = len(sys.argv) > 2 and sys.argv[2] == "range"
    if not torch.cuda.is_available():
        print("profile_step: CUDA not available", file=sys.stderr)
        return 1
    dev = torch.device("cuda:0")
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(32, 10),
    ).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(64, 3, 32, 32, device=dev)
    y = torch.randint(0, 10, (64,), device=dev)
    loss = None
    for _ in range(steps):
        if ranges:
            torch.cuda.synchronize()
            torch.cuda.cudart().cudaProfilerStart()
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if ranges:
            torch.cuda.synchronize()
            torch.cuda.cudart().cudaProfilerStop()
    torch.cuda.synchronize()
    value = loss.item()
    if not value == value:
        print("profile_step: loss is NaN", file=sys.stderr)
        return 1
    print(f"profile_step: {steps} step(s), loss {value:.3f}")
    print("profile_step: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
