"""PyTorch as people run it beyond eager mode, for rtrace's GPU proof: a model compiled with
`torch.compile` (Inductor's Triton kernels, launched by Triton's own launcher through the
driver, with no runtime call around them), trained a few steps; then the eager model captured
into a CUDA graph (`torch.cuda.CUDAGraph`) and replayed, so that its kernels run as graph
nodes.

Prints deterministic lines only (shapes, counts, and whether results agree with eager mode
within a tolerance) and ends with "compiled: OK"; exits non-zero on failure.
"""

import sys

import torch


def model_of(dev):
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(64, 256),
        torch.nn.GELU(),
        torch.nn.LayerNorm(256),
        torch.nn.Linear(256, 10),
    ).to(dev)


def main() -> int:
    if not torch.cuda.is_available():
        print("compiled: CUDA not available", file=sys.stderr)
        return 1
    dev = torch.device("cuda:0")
    x = torch.randn(512, 64, device=dev, generator=torch.Generator(device=dev).manual_seed(1))
    y = torch.randint(0, 10, (512,), device=dev, generator=torch.Generator(device=dev).manual_seed(2))

    # 1. torch.compile: the same steps as eager mode, losses within a tolerance.
    losses = {}
    for mode in ("eager", "compiled"):
        model = model_of(dev)
        step_model = torch.compile(model) if mode == "compiled" else model
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        out = []
        for _ in range(4):
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(step_model(x), y)
            loss.backward()
            opt.step()
            out.append(loss.item())
        losses[mode] = out
    torch.cuda.synchronize()
    close = all(abs(a - b) <= 1e-3 * max(1.0, abs(a)) for a, b in zip(losses["eager"], losses["compiled"]))
    if not close or not losses["compiled"][-1] < losses["compiled"][0]:
        print(f"compiled: losses differ or do not decrease: {losses}", file=sys.stderr)
        return 1
    print("compiled: 4 steps compiled, losses as eager mode's")

    # 2. A CUDA graph of the eager model's forward pass, replayed on new inputs.
    model = model_of(dev).eval()
    static_x = torch.zeros(512, 64, device=dev)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        for _ in range(2):  # warm-up outside the capture, as the docs ask
            model(static_x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), torch.no_grad():
        static_out = model(static_x)
    replays, agree = 5, 0
    for i in range(replays):
        xi = torch.randn(512, 64, device=dev, generator=torch.Generator(device=dev).manual_seed(10 + i))
        static_x.copy_(xi)
        graph.replay()
        with torch.no_grad():
            want = model(xi)
        agree += bool(torch.allclose(static_out, want, atol=1e-5, rtol=1e-4))
    torch.cuda.synchronize()
    if agree != replays:
        print(f"compiled: {replays - agree} of {replays} graph replays differ from eager", file=sys.stderr)
        return 1
    print(f"compiled: a CUDA graph replayed {replays} times, outputs as eager mode's")
    print("compiled: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
