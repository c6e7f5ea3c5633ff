"""A PyTorch training step profiled by the PyTorch profiler (Kineto, a CUPTI client) inside a
traced program: writes the profiler's Chrome trace to argv[1] and prints the step's loss, so
tests/gpu/cupti_match.py can compare Kineto's kernel and copy records with rtrace's."""
import sys

import torch
from torch.profiler import ProfilerActivity, profile

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x_host = torch.randn(256, 512).pin_memory()
y = torch.randint(0, 10, (256,), device="cuda")
side = torch.cuda.Stream()


def step():
    x = x_host.to("cuda", non_blocking=True)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.cuda.stream(side):
        torch.ones(1 << 16, device="cuda").mul_(3)
    return loss


step()
torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    for _ in range(5):
        loss = step()
    loss.cpu()
    torch.cuda.synchronize()
prof.export_chrome_trace(sys.argv[1])
print(f"kineto step loss {float(loss):.4f}")
