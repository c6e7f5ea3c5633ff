"""A PyTorch training loop traced by rtrace (docs/python.md): capture after the warm-up steps,
one external correlation id and one NVTX range per step.

    pip install .            # from the rtrace repository: the rtrace command and module
    rtrace record --capture-range cudaProfilerApi -o train-%p.bin -- python3 pytorch_training.py
    rtrace report train-*.bin
    python3 -c 'import glob, rtrace; print(rtrace.load(*glob.glob("train-*.bin")).kernels.to_pandas())'
"""

import torch

import rtrace

WARMUP, STEPS = 5, 20

model = torch.nn.Sequential(
    torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)
).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(64, 1024, device="cuda")
y = torch.randn(64, 1024, device="cuda")

for step in range(STEPS):
    if step == WARMUP:
        # Leave out the warm-up (cuBLAS handles, the caching allocator growing): recording
        # starts here (rtrace record --capture-range cudaProfilerApi).
        torch.cuda.synchronize()
        rtrace.start()
    # Every CUDA call this thread makes inside, and the GPU work it launches, is linked to
    # `step` (docs/nvtx.md says how work that other threads launch meanwhile is credited).
    with rtrace.external_id(step), torch.cuda.nvtx.range(f"step {step}"):
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
torch.cuda.synchronize()
rtrace.stop()

