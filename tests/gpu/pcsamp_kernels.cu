// Kernels with a known performance problem, for validating PC sampling (issue 6).
//
//   pcsamp_kernels [all|bank|strided|fma] [REPS]
//
// bank_conflicts: every warp reads a column of a 32x32 shared-memory tile, so each load is a
//   32-way bank conflict (the shared-memory pipe is the bottleneck: ncu shows MIO throttle /
//   short scoreboard stalls on the LDS and the instruction that waits for it).
// strided_reads: each thread reads global memory with a stride of 4099 elements, so every
//   load is its own sector and misses in L1 (ncu: long scoreboard stalls on the use of the load).
// fma_chain: a chain of dependent FMAs with no memory traffic (ncu: wait / math-dependency stalls).
//
// Prints one checksum line per kernel so a traced run can be compared with an untraced one,
// and on stderr each kernel's total GPU time over the repetitions (cudaEvent pairs):
//   time <kernel> <ms>
// Built with -lineinfo so that samples map to source lines.  With -DPCSAMP_PROBE it also runs
// its own CUPTI PC-sampling client (an independent reader of the same API, see
// pcsamp_probe.inc) and prints what it collected.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define CHECK(call)                                                                      \
    do {                                                                                 \
        cudaError_t e_ = (call);                                                         \
        if (e_ != cudaSuccess) {                                                         \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                \
                    cudaGetErrorString(e_));                                             \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

__global__ void bank_conflicts(float *out, int iters)
{
    __shared__ float tile[32][32];
    int tx = threadIdx.x & 31;
    int ty = threadIdx.x >> 5;
    for (int r = ty; r < 32; r += blockDim.x >> 5)
        tile[r][tx] = (float)(tx + r);
    __syncthreads();
    float acc = 0.0f;
    for (int i = 0; i < iters; ++i) {
        acc += tile[tx][(i + ty) & 31];  // the warp's 32 lanes hit one bank: 32-way conflict
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

__global__ void strided_reads(const float *in, float *out, unsigned mask, int iters)
{
    unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 0.0f;
    for (int i = 0; i < iters; ++i) {
        unsigned idx = ((tid + (unsigned)i * 977u) * 4099u) & mask;
        acc += in[idx];  // one sector per lane: long scoreboard on the add
    }
    out[tid] = acc;
}

__global__ void fma_chain(float *out, int iters)
{
    float a = (float)threadIdx.x * 1e-3f, b = 1.0001f, c = 0.9999f;
    for (int i = 0; i < iters; ++i) {
        a = fmaf(a, b, c);  // each FMA waits for the one before
        a = fmaf(a, c, b);
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = a;
}

static double checksum(const float *d, size_t n)
{
    float *h = (float *)malloc(n * sizeof(float));
    CHECK(cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost));
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += h[i];
    free(h);
    return s;
}

#ifdef PCSAMP_PROBE
#include "pcsamp_probe.inc"
#endif

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "all";
    int reps = argc > 2 ? atoi(argv[2]) : 3;
    bool all = strcmp(which, "all") == 0;
    int sms = 0;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
#ifdef PCSAMP_PROBE
    probe_start();
#endif
    const int threads = 256;
    const int blocks = sms * 8;
    const size_t n = (size_t)blocks * threads;
    const unsigned big = 1u << 26;  // 256 MiB of floats for the strided reads
    float *out, *in;
    CHECK(cudaMalloc(&out, n * sizeof(float)));
    CHECK(cudaMalloc(&in, big * sizeof(float)));
    CHECK(cudaMemset(in, 0, big * sizeof(float)));
    cudaEvent_t t0, t1;
    CHECK(cudaEventCreate(&t0));
    CHECK(cudaEventCreate(&t1));
    float ms[3] = {0, 0, 0}, e = 0;
    for (int r = 0; r < reps; r++) {
        if (all || strcmp(which, "bank") == 0) {
            CHECK(cudaEventRecord(t0));
            bank_conflicts<<<blocks, threads>>>(out, 20000);
            CHECK(cudaGetLastError());
            CHECK(cudaEventRecord(t1));
            CHECK(cudaEventSynchronize(t1));
            CHECK(cudaEventElapsedTime(&e, t0, t1));
            ms[0] += e;
            printf("bank_conflicts rep %d checksum %.6e\n", r, checksum(out, n));
        }
        if (all || strcmp(which, "strided") == 0) {
            CHECK(cudaEventRecord(t0));
            strided_reads<<<blocks, threads>>>(in, out, big - 1, 400);
            CHECK(cudaGetLastError());
            CHECK(cudaEventRecord(t1));
            CHECK(cudaEventSynchronize(t1));
            CHECK(cudaEventElapsedTime(&e, t0, t1));
            ms[1] += e;
            printf("strided_reads rep %d checksum %.6e\n", r, checksum(out, n));
        }
        if (all || strcmp(which, "fma") == 0) {
            CHECK(cudaEventRecord(t0));
            fma_chain<<<blocks, threads>>>(out, 20000);
            CHECK(cudaGetLastError());
            CHECK(cudaEventRecord(t1));
            CHECK(cudaEventSynchronize(t1));
            CHECK(cudaEventElapsedTime(&e, t0, t1));
            ms[2] += e;
            printf("fma_chain rep %d checksum %.6e\n", r, checksum(out, n));
        }
    }
    fprintf(stderr, "time bank_conflicts %.3f\ntime strided_reads %.3f\ntime fma_chain %.3f\n", ms[0],
            ms[1], ms[2]);
    CHECK(cudaDeviceSynchronize());
#ifdef PCSAMP_PROBE
    probe_finish();
#endif
    CHECK(cudaFree(out));
    CHECK(cudaFree(in));
    return 0;
}
