// The kernels of tests/gpu/gpu_metrics_check.sh (issue 21), run under `rtrace record
// --gpu-metrics`: a DRAM copy (1 GiB copied REPS times in one launch, each pass reading and
// writing 1 GiB), an idle gap, an FMA kernel (no memory traffic), another gap, and a WMMA fp16
// tensor-core kernel; each inside an NVTX range of its name. Prints the bytes the copy moved.
// Build: nvcc -arch=sm_90 -o gpu_metrics_kernels gpu_metrics_kernels.cu -ldl
#include <cstdio>
#include <unistd.h>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <mma.h>
#include <nvtx3/nvToolsExt.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    printf("FAIL %s: %s\n", #x, cudaGetErrorString(e_)); return 1; } } while (0)

static const int REPS = 40;

__global__ void copy_kernel(const float4 *__restrict__ src, float4 *__restrict__ dst, size_t n, int reps) {
    for (int r = 0; r < reps; r++)
        for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
            dst[i] = src[i];
}
__global__ void fma_kernel(float *out, int iters) {
    float a = threadIdx.x * 1e-3f, b = 1.0001f, c = 0.9999f, d = blockIdx.x * 1e-4f;
    for (int i = 0; i < iters; i++) { a = fmaf(a, b, c); d = fmaf(d, c, b); b = fmaf(b, c, a * 1e-9f); }
    out[blockIdx.x * blockDim.x + threadIdx.x] = a + b + d;
}
using namespace nvcuda;
__global__ void wmma_kernel(const half *A, const half *B, float *C, int iters) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    wmma::load_matrix_sync(a, A, 16);
    wmma::load_matrix_sync(b, B, 16);
    for (int i = 0; i < iters; i++) wmma::mma_sync(acc, a, b, acc);
    wmma::store_matrix_sync(C + blockIdx.x * 256, acc, 16, wmma::mem_row_major);
}

int main() {
    const size_t N = (size_t)1 << 30;
    cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
    int nsm = prop.multiProcessorCount;
    float4 *src, *dst; CK(cudaMalloc(&src, N)); CK(cudaMalloc(&dst, N));
    CK(cudaMemset(src, 1, N)); CK(cudaMemset(dst, 0, N));
    float *fout; CK(cudaMalloc(&fout, (size_t)nsm * 8 * 1024 * sizeof(float)));
    half *A, *B; float *C; CK(cudaMalloc(&A, 256 * sizeof(half))); CK(cudaMalloc(&B, 256 * sizeof(half)));
    CK(cudaMemset(A, 0, 256 * sizeof(half))); CK(cudaMemset(B, 0, 256 * sizeof(half)));
    CK(cudaMalloc(&C, (size_t)nsm * 16 * 256 * sizeof(float)));
    CK(cudaDeviceSynchronize());
    usleep(20000);
    nvtxRangePushA("copy");
    copy_kernel<<<nsm * 8, 512>>>(src, dst, N / 16, REPS);
    CK(cudaDeviceSynchronize());
    nvtxRangePop();
    usleep(30000);
    nvtxRangePushA("fma");
    fma_kernel<<<nsm * 8, 1024>>>(fout, 200000);
    CK(cudaDeviceSynchronize());
    nvtxRangePop();
    usleep(20000);
    nvtxRangePushA("wmma");
    wmma_kernel<<<nsm * 16, 32>>>(A, B, C, 400000);
    CK(cudaDeviceSynchronize());
    nvtxRangePop();
    usleep(20000);
    printf("copy bytes read %zu written %zu\n", (size_t)REPS * N, (size_t)REPS * N);
    return 0;
}
