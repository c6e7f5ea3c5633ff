"""CuPy as people run it, for rtrace's GPU proof: elementwise and reduction kernels (CuPy's
NVRTC-compiled kernels, launched through its statically linked runtime), a `RawKernel` of
the program's own, cuBLAS (a matmul), cuFFT, a non-default stream, pinned-memory copies and
an event.

Prints deterministic lines only (shapes, and whether results agree with NumPy within a
tolerance) and ends with "cupy: OK"; exits non-zero on failure.
"""

import sys

import numpy as np


SAXPY = r"""
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""


def main() -> int:
    import cupy as cp

    if cp.cuda.runtime.getDeviceCount() < 1:
        print("cupy: no GPU device", file=sys.stderr)
        return 1
    rng = np.random.default_rng(0)
    a = rng.standard_normal((300, 200)).astype(np.float32)
    b = rng.standard_normal((200, 100)).astype(np.float32)

    # 1. Elementwise, reductions and a matmul (cuBLAS), against NumPy.
    da, db = cp.asarray(a), cp.asarray(b)
    got = cp.asnumpy(cp.tanh(da @ db).sum(axis=0))
    if not np.allclose(got, np.tanh(a @ b).sum(axis=0), atol=1e-2, rtol=1e-3):
        print("cupy: matmul and reduction differ from NumPy", file=sys.stderr)
        return 1
    print(f"cupy: matmul, tanh and a reduction {got.shape}, as NumPy's")

    # 2. A RawKernel of the program's own, ten launches on a non-default stream.
    kernel = cp.RawKernel(SAXPY, "saxpy")
    n = 1 << 16
    x = cp.arange(n, dtype=cp.float32)
    y = cp.zeros(n, dtype=cp.float32)
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        for _ in range(10):
            kernel(((n + 255) // 256,), (256,), (np.float32(0.5), x, y, np.int32(n)))
        done = cp.cuda.Event()
        done.record(stream)
    done.synchronize()
    if not np.allclose(cp.asnumpy(y), 5.0 * np.arange(n, dtype=np.float32)):
        print("cupy: saxpy differs", file=sys.stderr)
        return 1
    print("cupy: a RawKernel launched 10 times on a stream, as NumPy's")

    # 3. cuFFT and pinned-memory copies.
    signal = rng.standard_normal(4096).astype(np.complex64)
    spectrum = cp.asnumpy(cp.fft.fft(cp.asarray(signal)))
    if not np.allclose(spectrum, np.fft.fft(signal), atol=1e-2, rtol=1e-3):
        print("cupy: fft differs", file=sys.stderr)
        return 1
    pinned = cp.cuda.alloc_pinned_memory(a.nbytes)
    host = np.frombuffer(pinned, np.float32, a.size).reshape(a.shape)
    host[...] = a
    back = cp.asnumpy(cp.asarray(host) * 2)
    if not np.array_equal(back, a * 2):
        print("cupy: pinned copies differ", file=sys.stderr)
        return 1
    print("cupy: an FFT of 4096 points and pinned-memory copies, as NumPy's")
    print("cupy: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
