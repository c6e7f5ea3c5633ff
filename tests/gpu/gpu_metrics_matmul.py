"""A bf16 matmul phase, then an elementwise phase, for tests/gpu/gpu_metrics_check.sh: the
tensor pipe should light up over the matmul kernels only. Prints a checksum of the results."""
import torch

torch.manual_seed(0)
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
x = torch.zeros(256 << 20, device="cuda", dtype=torch.float32)
torch.cuda.synchronize()
torch.cuda.nvtx.range_push("matmul")
for _ in range(30):
    c = a @ a
torch.cuda.synchronize()
torch.cuda.nvtx.range_pop()
torch.cuda.nvtx.range_push("elementwise")
for _ in range(30):
    x.add_(1.0)
torch.cuda.synchronize()
torch.cuda.nvtx.range_pop()
print("%.1f %.1f" % (float(c[0, :8].float().sum()), float(x[:8].sum())))
