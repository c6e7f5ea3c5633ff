"""A small PyTorch workload for rtrace's GPU proof.

Five SGD steps of a small MLP on the GPU, then a handful of other operations
(matmul, reductions, a copy between streams, events, pinned-memory copies).
Prints deterministic lines only (no timings, no loss values that could vary
in the last digit) and ends with "pytorch: OK"; exits non-zero on failure.
"""

import sys

import torch


def main() -> int:
    if not torch.cuda.is_available():
        print("pytorch: CUDA not available", file=sys.stderr)
        return 1
    dev = torch.device("cuda:0")
    torch.manual_seed(0)

    model = torch.nn.Sequential(
        torch.nn.Linear(64, 128),
        torch.nn.ReLU(),
        torch.nn.Linear(128, 128),
        torch.nn.ReLU(),
        torch.nn.Linear(128, 10),
    ).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(256, 64, device=dev)
    y = torch.randint(0, 10, (256,), device=dev)

    losses = []
    for _ in range(5):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    torch.cuda.synchronize()
    if not all(v == v and v < 100.0 for v in losses):  # NaN or exploding
        print(f"pytorch: bad losses {losses}", file=sys.stderr)
        return 1
    if not losses[-1] < losses[0]:
        print(f"pytorch: loss did not decrease {losses}", file=sys.stderr)
        return 1
    print("pytorch: 5 training steps, loss decreased")

    # Other operations: matmul against the CPU result, reductions, elementwise.
    a = torch.randn(200, 300, device=dev)
    b = torch.randn(300, 100, device=dev)
    c = a @ b
    ref = a.cpu().double() @ b.cpu().double()
    err = (c.cpu().double() - ref).abs().max().item()
    if err > 1e-2:
        print(f"pytorch: matmul error {err}", file=sys.stderr)
        return 1
    s = torch.arange(1000, device=dev, dtype=torch.float64).sum().item()
    if s != 499500.0:
        print(f"pytorch: sum {s}", file=sys.stderr)
        return 1
    z = torch.relu(torch.linspace(-1, 1, 101, device=dev)).mean().item()
    if abs(z - 25.5 / 101) > 1e-5:
        print(f"pytorch: relu mean {z}", file=sys.stderr)
        return 1
    print("pytorch: matmul, sum, relu ok")

    # A side stream, events, and pinned host memory with non-blocking copies.
    side = torch.cuda.Stream()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    host = torch.arange(1 << 16, dtype=torch.float32).pin_memory()
    with torch.cuda.stream(side):
        start.record()
        d = host.to(dev, non_blocking=True)
        d.mul_(2.0)
        back = d.to("cpu", non_blocking=True)
        end.record()
    end.synchronize()
    _ = start.elapsed_time(end)
    torch.cuda.synchronize()
    if not torch.equal(back, host * 2.0):
        print("pytorch: stream copy mismatch", file=sys.stderr)
        return 1
    print("pytorch: streams, events, pinned copies ok")

    del model, opt, x, y, a, b, c, d, back
    torch.cuda.empty_cache()
    print("pytorch: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
