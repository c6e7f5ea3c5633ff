"""A PyTorch training loop that dies in the middle of a step, for rtrace's crash checks.

    crash_step.py MODE STEPS

Runs STEPS SGD steps of a small CNN on the GPU, printing "step N" (flushed) after each. In the
last step, after the forward pass was launched and before the backward pass (no
synchronization: kernels are in flight), MODE ends the process: `segv` (a read of address 0
through ctypes: SIGSEGV), `kill` (SIGKILL to itself), `exit` (finishes the step, prints
"crash_step: OK" and exits 0: the reference run).
"""

import ctypes
import os
import signal
import sys

import torch


def main() -> int:
    mode, steps = sys.argv[1], int(sys.argv[2])
    dev = torch.device("cuda:0")
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.Conv2d(16, 16, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Linear(16 * 32 * 32, 10),
    ).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(64, 3, 32, 32, device=dev)
    y = torch.randint(0, 10, (64,), device=dev)
    for i in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        if i == steps - 1 and mode == "segv":
            ctypes.string_at(0)
        if i == steps - 1 and mode == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        print(f"step {i}", flush=True)
    print("crash_step: OK", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
