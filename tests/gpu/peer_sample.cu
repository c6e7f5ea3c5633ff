// Peer-to-peer copies between two GPUs, by every route a program uses: cudaMemcpyPeer,
// cudaMemcpyPeerAsync, cudaMemcpy (DeviceToDevice and Default) between the devices' memory,
// cuMemcpyPeer and cuMemcpyPeerAsync, with peer access enabled, plus a kernel on each device.
// Last line: "peer copies <n> bytes <b> kernels <k> devices <d> peer-access <0|1>", what
// tests/gpu/activity_check.py and cupti_match.py compare rtrace's records with. Needs 2 GPUs
// (exits 2 with fewer).
//   nvcc -O2 -o peer_sample tests/gpu/peer_sample.cu -lcuda
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>

#define CK(x)                                                                                   \
    do {                                                                                        \
        auto e_ = (x);                                                                          \
        if (e_ != 0) {                                                                          \
            std::fprintf(stderr, "%s:%d %s -> %d\n", __FILE__, __LINE__, #x, (int)e_);         \
            std::exit(1);                                                                       \
        }                                                                                       \
    } while (0)

__global__ void touch(unsigned *p, unsigned v) { p[threadIdx.x] += v; }

int main() {
    int n = 0;
    CK(cudaGetDeviceCount(&n));
    if (n < 2) {
        std::fprintf(stderr, "peer_sample: %d GPU(s), needs 2\n", n);
        return 2;
    }
    const size_t bytes = 4 << 20;
    int can01 = 0, can10 = 0;
    CK(cudaDeviceCanAccessPeer(&can01, 0, 1));
    CK(cudaDeviceCanAccessPeer(&can10, 1, 0));
    unsigned *a, *b;
    cudaStream_t s0, s1;
    CK(cudaSetDevice(0));
    CK(cudaMalloc(&a, bytes));
    CK(cudaMemset(a, 1, bytes));
    CK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
    if (can01) CK(cudaDeviceEnablePeerAccess(1, 0));
    CK(cudaSetDevice(1));
    CK(cudaMalloc(&b, bytes));
    CK(cudaMemset(b, 2, bytes));
    CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    if (can10) CK(cudaDeviceEnablePeerAccess(0, 0));
    CK(cudaDeviceSynchronize());

    int copies = 0;
    size_t total = 0;
    auto count = [&](size_t b) { copies++; total += b; };
    // Runtime API.
    CK(cudaMemcpyPeer(b, 1, a, 0, bytes));
    count(bytes);
    CK(cudaMemcpyPeerAsync(a, 0, b, 1, bytes / 2, s1));
    count(bytes / 2);
    CK(cudaStreamSynchronize(s1));
    CK(cudaMemcpy(b, a, bytes / 4, cudaMemcpyDeviceToDevice));
    count(bytes / 4);
    CK(cudaMemcpy(a, b, bytes / 8, cudaMemcpyDefault));
    count(bytes / 8);
    // Driver API, between the two primary contexts.
    CUcontext c0, c1;
    CK(cuDevicePrimaryCtxRetain(&c0, 0));
    CK(cuDevicePrimaryCtxRetain(&c1, 1));
    CK(cuMemcpyPeer((CUdeviceptr)b, c1, (CUdeviceptr)a, c0, bytes / 16));
    count(bytes / 16);
    CK(cuMemcpyPeerAsync((CUdeviceptr)a, c0, (CUdeviceptr)b, c1, bytes / 32, (CUstream)s0));
    count(bytes / 32);
    CK(cudaStreamSynchronize(s0));
    // A kernel on each device.
    CK(cudaSetDevice(0));
    touch<<<1, 32, 0, s0>>>(a, 1);
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(s0));
    CK(cudaSetDevice(1));
    touch<<<1, 32, 0, s1>>>(b, 1);
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(s1));
    CK(cuDevicePrimaryCtxRelease(0));
    CK(cuDevicePrimaryCtxRelease(1));
    std::printf("peer copies %d bytes %zu kernels 2 devices %d peer-access %d\n", copies, total, n,
                can01 && can10);
    return 0;
}
