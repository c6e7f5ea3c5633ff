"""The PyTorch profiler inside a traced program must keep working (rtrace interposes the CUPTI
entry points it uses). Prints how many CUDA kernels the profiler saw and a checksum."""
import torch
from torch.profiler import ProfilerActivity, profile

x = torch.zeros(1000, device="cuda")
x.add_(1)
torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    for _ in range(10):
        x.add_(1)
    torch.cuda.synchronize()
kernels = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
print(f"profiler kernels {kernels} sum {float(x.sum()):.0f}")
