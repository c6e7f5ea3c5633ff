// Sample kernels for tests/gpu/occupancy_check.sh: each launch is limited by a different
// resource, so rtrace's theoretical occupancy can be compared with Nsight Compute's for every
// block limit. extern "C" keeps the names the same in rtrace's report and in ncu's.
//
//   k_warps        1024 threads, few registers: the warp slots limit (2 blocks, 100 %)
//   k_registers    256 threads (16x16), many live values: the registers limit
//   k_dynamic_smem 128 threads, 100 KiB dynamic shared memory: the shared memory limit
//   k_static_smem  64 threads, 40 KiB static shared memory: the shared memory limit
//   k_blocks       32 threads: the SM's block slots limit
//
// Each kernel is launched once; the program prints one line per kernel and exits 0.
#include <cstdio>
#include <cuda_runtime.h>

#define CHECK(call)                                                                     \
    do {                                                                                \
        cudaError_t e_ = (call);                                                        \
        if (e_ != cudaSuccess) {                                                        \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,               \
                    cudaGetErrorString(e_));                                            \
            return 1;                                                                   \
        }                                                                               \
    } while (0)

constexpr int N = 1 << 20;
constexpr int LIVE = 96;  // values each thread of k_registers keeps live

extern "C" __global__ void k_warps(const float *in, float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] * 2.0f + 1.0f;
}

extern "C" __global__ void k_registers(const float *in, float *out, int n) {
    int t = (blockIdx.x * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    float v[LIVE];
#pragma unroll
    for (int i = 0; i < LIVE; i++) v[i] = in[(t + i * 977) % n];
    float acc = 0.0f;
    for (int r = 0; r < 4; r++) {
#pragma unroll
        for (int i = 0; i < LIVE; i++) {
            v[i] = fmaf(v[i], v[(i + 7) % LIVE], acc);
            acc += v[i] * 0.5f;
        }
    }
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < LIVE; i++) s += v[i];
    out[t % n] = s + acc;
}

extern "C" __global__ void k_dynamic_smem(const float *in, float *out, int n) {
    extern __shared__ float tile[];  // 100 KiB
    const int words = 100 * 1024 / sizeof(float);
    for (int i = threadIdx.x; i < words; i += blockDim.x) tile[i] = in[(blockIdx.x + i) % n];
    __syncthreads();
    float s = 0.0f;
    for (int i = threadIdx.x; i < words; i += blockDim.x) s += tile[words - 1 - i];
    out[(blockIdx.x * blockDim.x + threadIdx.x) % n] = s;
}

extern "C" __global__ void k_static_smem(const float *in, float *out, int n) {
    __shared__ float tile[40 * 1024 / sizeof(float)];  // 40 KiB
    const int words = sizeof(tile) / sizeof(float);
    for (int i = threadIdx.x; i < words; i += blockDim.x) tile[i] = in[(blockIdx.x + i) % n];
    __syncthreads();
    float s = 0.0f;
    for (int i = threadIdx.x; i < words; i += blockDim.x) s += tile[words - 1 - i];
    out[(blockIdx.x * blockDim.x + threadIdx.x) % n] = s;
}

extern "C" __global__ void k_blocks(const float *in, float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] + 1.0f;
}

int main() {
    float *in = nullptr, *out = nullptr;
    CHECK(cudaMalloc(&in, N * sizeof(float)));
    CHECK(cudaMalloc(&out, N * sizeof(float)));
    CHECK(cudaMemset(in, 0, N * sizeof(float)));

    k_warps<<<1000, 1024>>>(in, out, N);
    CHECK(cudaGetLastError());
    k_registers<<<700, dim3(16, 16)>>>(in, out, N);
    CHECK(cudaGetLastError());
    CHECK(cudaFuncSetAttribute(k_dynamic_smem, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               100 * 1024));
    k_dynamic_smem<<<500, 128, 100 * 1024>>>(in, out, N);
    CHECK(cudaGetLastError());
    k_static_smem<<<2000, 64>>>(in, out, N);
    CHECK(cudaGetLastError());
    k_blocks<<<10000, 32>>>(in, out, N);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());

    const char *names[] = {"k_warps", "k_registers", "k_dynamic_smem", "k_static_smem",
                           "k_blocks"};
    const void *funcs[] = {(const void *)k_warps, (const void *)k_registers,
                           (const void *)k_dynamic_smem, (const void *)k_static_smem,
                           (const void *)k_blocks};
    const int blocks[] = {1024, 256, 128, 64, 32};
    const size_t dynamic[] = {0, 0, 100 * 1024, 0, 0};
    for (int k = 0; k < 5; k++) {
        cudaFuncAttributes a;
        CHECK(cudaFuncGetAttributes(&a, funcs[k]));
        int active = 0;
        CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&active, funcs[k], blocks[k],
                                                            dynamic[k]));
        printf("%s: %d registers, %zu B static shared memory, %d active blocks per SM "
               "(cudaOccupancyMaxActiveBlocksPerMultiprocessor)\n",
               names[k], a.numRegs, a.sharedSizeBytes, active);
    }
    CHECK(cudaFree(in));
    CHECK(cudaFree(out));
    return 0;
}
