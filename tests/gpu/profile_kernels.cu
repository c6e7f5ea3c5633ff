// Kernels whose hardware behaviour is known, for checking kernel profiling against Nsight
// Compute (tests/gpu/profile_check.sh): 32-way shared-memory bank conflicts and their
// conflict-free twin, strided (uncoalesced) and coalesced global loads, a compute-bound FMA
// loop, an in-place increment (replay must restore memory: after N launches every element is
// N), and a cuBLAS SGEMM. Each runs LAUNCHES times (argv[1], default 2). Prints checksums the
// traced and untraced runs must share.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <cublas_v2.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
    fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

__global__ void bank_conflicts(float *out, int iters) {
    __shared__ float s[32 * 256];
    int t = threadIdx.x;
    for (int i = 0; i < 32; i++) s[t * 32 + i] = t + i;       // 32-way on store
    __syncthreads();
    float acc = 0;
    for (int k = 0; k < iters; k++) acc += s[(t * 32 + k) % (32 * 256)];  // 32-way on load
    out[blockIdx.x * blockDim.x + t] = acc;
}

__global__ void no_conflicts(float *out, int iters) {
    __shared__ float s[32 * 256];
    int t = threadIdx.x;
    for (int i = 0; i < 32; i++) s[i * 256 + t] = t + i;
    __syncthreads();
    float acc = 0;
    for (int k = 0; k < iters; k++) acc += s[((k % 32) * 256 + t)];
    out[blockIdx.x * blockDim.x + t] = acc;
}

__global__ void strided_load(const float *in, float *out, int n, int stride) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[(size_t(i) * stride) % (size_t(n) * 32)];
}

__global__ void coalesced_load(const float *in, float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i];
}

__global__ void compute_bound(float *out, int iters) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float a = i * 1e-6f, b = 1.0001f, c = 0.9999f;
    for (int k = 0; k < iters; k++) { a = fmaf(a, b, c); b = fmaf(b, c, a * 1e-9f); }
    out[i] = a + b;
}

__global__ void increment(int *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1;
}

int main(int argc, char **argv) {
    int launches = argc > 1 ? atoi(argv[1]) : 2;
    const int n = 1 << 22;
    float *in, *out, *a, *b, *c;
    int *x;
    CHECK(cudaMalloc(&in, sizeof(float) * size_t(n) * 32));
    CHECK(cudaMalloc(&out, sizeof(float) * n));
    CHECK(cudaMalloc(&x, sizeof(int) * n));
    CHECK(cudaMemset(in, 0, sizeof(float) * size_t(n) * 32));
    CHECK(cudaMemset(x, 0, sizeof(int) * n));
    const int m = 1024;
    CHECK(cudaMalloc(&a, sizeof(float) * m * m));
    CHECK(cudaMalloc(&b, sizeof(float) * m * m));
    CHECK(cudaMalloc(&c, sizeof(float) * m * m));
    CHECK(cudaMemset(a, 0, sizeof(float) * m * m));
    CHECK(cudaMemset(b, 0, sizeof(float) * m * m));
    cublasHandle_t h;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) { fprintf(stderr, "cublasCreate failed\n"); return 1; }
    const float one = 1, zero = 0;
    for (int l = 0; l < launches; l++) {
        bank_conflicts<<<264, 256>>>(out, 4096);
        no_conflicts<<<264, 256>>>(out, 4096);
        strided_load<<<n / 256, 256>>>(in, out, n, 32);
        coalesced_load<<<n / 256, 256>>>(in, out, n);
        compute_bound<<<1056, 256>>>(out, 20000);
        increment<<<n / 256, 256>>>(x, n);
        cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &one, a, m, b, m, &zero, c, m);
    }
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    int *hx = (int *)malloc(sizeof(int) * n);
    CHECK(cudaMemcpy(hx, x, sizeof(int) * n, cudaMemcpyDeviceToHost));
    long long sum = 0;
    for (int i = 0; i < n; i++) sum += hx[i];
    printf("increment: %lld (expected %lld)\n", sum, (long long)n * launches);
    cublasDestroy(h);
    return sum == (long long)n * launches ? 0 : 3;
}
