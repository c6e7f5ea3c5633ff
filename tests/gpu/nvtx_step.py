"""A small PyTorch training loop with NVTX ranges, for tests/gpu/nvtx_check.py.

    python3 tests/gpu/nvtx_step.py ranges|emit|edges [ITERS=5]

ranges: each iteration is a torch.cuda.nvtx range "iter I" holding "forward", "backward" and
        "optimizer" ranges (on the main thread);
emit:   the same loop under torch.autograd.profiler.emit_nvtx(), which pushes a range per
        operator (aten::..., on whichever thread runs it) instead;
edges:  for rtrace's RTRACE_CAPTURE_RANGE=cudaProfilerApi: each iteration "iter I" recorded
        between torch.cuda.profiler.start() and stop(), with ranges across the edges: "forward"
        pushed and "async" started while recording, popped and ended while paused, "hidden"
        pushed while paused and popped while recording, then "backward" and "optimizer" inside
        "iter I".
Prints "nvtx_step MODE iters N loss X" last.
"""
import sys

import torch
import torch.cuda.profiler  # noqa: F401 (cudaProfilerStart/Stop, for edges)


def main():
    mode = sys.argv[1]
    iters = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(64, 256, device="cuda")
    y = torch.randint(0, 10, (64,), device="cuda")
    torch.cuda.synchronize()
    nvtx = torch.cuda.nvtx
    loss = None

    def backward_and_optimizer(loss):
        """The "backward" and "optimizer" ranges, then the iteration's pop."""
        nvtx.range_push("backward")
        loss.backward()
        nvtx.range_pop()
        nvtx.range_push("optimizer")
        opt.step()
        opt.zero_grad()
        nvtx.range_pop()
        torch.cuda.synchronize()
        nvtx.range_pop()

    for i in range(iters):
        if mode == "ranges":
            nvtx.range_push(f"iter {i}")
            nvtx.range_push("forward")
            loss = torch.nn.functional.cross_entropy(model(x), y)
            nvtx.range_pop()
            backward_and_optimizer(loss)
        elif mode == "edges":
            torch.cuda.profiler.start()
            nvtx.range_push(f"iter {i}")
            nvtx.range_push("forward")
            started = nvtx.range_start("async")
            loss = torch.nn.functional.cross_entropy(model(x), y)
            torch.cuda.profiler.stop()
            nvtx.range_pop()
            nvtx.range_end(started)
            nvtx.range_push("hidden")
            torch.cuda.profiler.start()
            nvtx.range_pop()
            backward_and_optimizer(loss)
            torch.cuda.profiler.stop()
        else:
            with torch.autograd.profiler.emit_nvtx():
                loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                opt.zero_grad()
            torch.cuda.synchronize()
    print(f"nvtx_step {mode} iters {iters} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
