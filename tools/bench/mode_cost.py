"""What each recording mode costs a PyTorch program (issue 21): a bf16 MLP training step and
two seed-style kernels (a bandwidth-bound scale of 256 MiB, a bf16 GEMM), each timed inside the
program with CUDA events after a warm-up. Prints `name median_ms` lines (medians over the
timed repetitions). Run by tools/bench/mode_cost.sh under each mode."""
import statistics

import torch


def timed(fn, reps, warm=5):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def main():
    torch.manual_seed(0)
    dev = "cuda"
    model = torch.nn.Sequential(
        *[m for _ in range(4) for m in (torch.nn.Linear(2048, 2048), torch.nn.ReLU())]
    ).to(dev, torch.bfloat16)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(1024, 2048, device=dev, dtype=torch.bfloat16)

    def step():
        opt.zero_grad(set_to_none=True)
        model(x).float().square().mean().backward()
        opt.step()

    big = torch.ones(64 << 20, device=dev)
    a = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    print("step_ms %.4f" % timed(step, 30))
    print("scale_ms %.4f" % timed(lambda: big.mul_(1.0), 30))
    print("gemm_ms %.4f" % timed(lambda: a @ a, 30))


if __name__ == "__main__":
    main()
