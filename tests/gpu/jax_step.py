"""JAX as people run it, for rtrace's GPU proof: jitted functions (XLA's fused kernels and its
cuBLAS calls), a jitted training step with `jax.grad` over several iterations, `vmap`, a
`lax.scan` loop (XLA's while loops on the device, and its command buffers: CUDA graphs), and
copies to and from the host.

Prints deterministic lines only (shapes, and whether results agree with NumPy within a
tolerance) and ends with "jax: OK"; exits non-zero on failure.
"""

import sys

import numpy as np


def main() -> int:
    import jax
    import jax.numpy as jnp

    # Float32 matmuls in full precision (on this GPU XLA's default is TF32, about 1e-3 off
    # NumPy's), so that the results can be compared with NumPy's.
    jax.config.update("jax_default_matmul_precision", "highest")
    gpus = [d for d in jax.devices() if d.platform == "gpu"]
    if not gpus:
        print("jax: no GPU device", file=sys.stderr)
        return 1
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 128), dtype=np.float32)
    b = rng.standard_normal((128, 64), dtype=np.float32)

    # 1. A jitted matmul with a fused elementwise tail, against NumPy.
    f = jax.jit(lambda x, y: jnp.tanh(x @ y) * 2.0 + 1.0)
    got = np.asarray(f(a, b))
    want = np.tanh(a @ b) * 2.0 + 1.0
    if not np.allclose(got, want, atol=1e-3, rtol=1e-3):
        print("jax: jitted matmul differs from NumPy", file=sys.stderr)
        return 1
    print(f"jax: jitted matmul {got.shape}, as NumPy's")

    # 2. A jitted training step of a linear model, 8 iterations: the loss decreases.
    w_true = rng.standard_normal((128, 1), dtype=np.float32)
    y = a @ w_true

    def loss(w, x, t):
        return jnp.mean((x @ w - t) ** 2)

    @jax.jit
    def step(w, x, t):
        g = jax.grad(loss)(w, x, t)
        return w - 0.05 * g, loss(w, x, t)

    w = jnp.zeros((128, 1), jnp.float32)
    losses = []
    for _ in range(8):
        w, l = step(w, a, y)
        losses.append(float(l))
    if not losses[-1] < losses[0]:
        print(f"jax: loss did not decrease {losses}", file=sys.stderr)
        return 1
    print("jax: 8 jitted training steps, loss decreased")

    # 3. vmap and a scan on the device.
    norms = np.asarray(jax.jit(jax.vmap(lambda r: jnp.sqrt(jnp.sum(r * r))))(a))
    if not np.allclose(norms, np.linalg.norm(a, axis=1), rtol=1e-4):
        print("jax: vmap differs", file=sys.stderr)
        return 1

    def body(c, x):
        c = c * 0.5 + x
        return c, c.sum()

    _, sums = jax.jit(lambda xs: jax.lax.scan(body, jnp.zeros(64, jnp.float32), xs))(b)
    c, want_sums = np.zeros(64, np.float32), []
    for row in b:
        c = c * 0.5 + row
        want_sums.append(c.sum())
    if not np.allclose(np.asarray(sums), np.array(want_sums), atol=1e-3, rtol=1e-4):
        print("jax: scan differs", file=sys.stderr)
        return 1
    print(f"jax: vmap over {norms.shape[0]} rows and a scan of {len(want_sums)} steps, as NumPy's")
    print("jax: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
