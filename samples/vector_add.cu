// vector_add.cu — a small CUDA runtime-API sample for rtrace.
//
// Allocates three vectors per stream, copies inputs in, launches a vector-add
// kernel a few times on two streams, times the work with events, synchronises
// the device, calls cuDriverGetVersion through cudaGetDriverEntryPointByVersion,
// copies the results back and checks them.  Prints
// "vector_add: OK" on success and exits non-zero on any failure.
//
// Build (shared cudart):  nvcc -O2 -cudart shared -o vector_add samples/vector_add.cu
// Build (static cudart):  nvcc -O2 -o vector_add_static samples/vector_add.cu
// Run under rtrace:       rtrace record -- ./vector_add

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(call)                                                              \
    do {                                                                         \
        cudaError_t err_ = (call);                                               \
        if (err_ != cudaSuccess) {                                               \
            std::fprintf(stderr, "vector_add: %s:%d: %s failed: %s\n", __FILE__, \
                         __LINE__, #call, cudaGetErrorString(err_));             \
            std::exit(1);                                                        \
        }                                                                        \
    } while (0)

__global__ void vec_add(const float *a, const float *b, float *c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

// c += a, so that repeated launches give a result that depends on the count.
__global__ void vec_acc(const float *a, float *c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] += a[i];
}

int main() {
    const int n = 1 << 20;
    const size_t bytes = n * sizeof(float);
    const int kStreams = 2;
    const int kRepeats = 3;  // extra vec_acc launches per stream

    int device_count = 0;
    CHECK(cudaGetDeviceCount(&device_count));
    if (device_count < 1) {
        std::fprintf(stderr, "vector_add: no CUDA device\n");
        return 1;
    }
    CHECK(cudaSetDevice(0));

    std::vector<float> ha(n), hb(n), hc[kStreams];
    for (int i = 0; i < n; ++i) {
        ha[i] = static_cast<float>(i % 1000) * 0.5f;
        hb[i] = static_cast<float>(i % 77) - 3.0f;
    }

    cudaStream_t streams[kStreams];
    float *da[kStreams], *db[kStreams], *dc[kStreams];
    for (int s = 0; s < kStreams; ++s) {
        CHECK(cudaStreamCreateWithFlags(&streams[s], cudaStreamNonBlocking));
        CHECK(cudaMalloc(&da[s], bytes));
        CHECK(cudaMalloc(&db[s], bytes));
        CHECK(cudaMalloc(&dc[s], bytes));
        hc[s].assign(n, -1.0f);
    }

    cudaEvent_t start, stop;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));

    // Synchronous copies of the inputs (one pair per stream's buffers).
    for (int s = 0; s < kStreams; ++s) {
        CHECK(cudaMemcpy(da[s], ha.data(), bytes, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(db[s], hb.data(), bytes, cudaMemcpyHostToDevice));
    }

    const int threads = 256;
    const int blocks = (n + threads - 1) / threads;

    CHECK(cudaEventRecord(start, streams[0]));
    for (int s = 0; s < kStreams; ++s) {
        vec_add<<<blocks, threads, 0, streams[s]>>>(da[s], db[s], dc[s], n);
        CHECK(cudaGetLastError());
        // Stream s adds `a` (s + kRepeats - 1) more times: the streams differ.
        for (int r = 0; r < kRepeats - 1 + s; ++r) {
            vec_acc<<<blocks, threads, 0, streams[s]>>>(da[s], dc[s], n);
            CHECK(cudaGetLastError());
        }
        CHECK(cudaMemcpyAsync(hc[s].data(), dc[s], bytes, cudaMemcpyDeviceToHost,
                              streams[s]));
    }
    // Make stream 0 wait for stream 1 so the stop event covers both.
    cudaEvent_t s1_done;
    CHECK(cudaEventCreateWithFlags(&s1_done, cudaEventDisableTiming));
    CHECK(cudaEventRecord(s1_done, streams[1]));
    CHECK(cudaStreamWaitEvent(streams[0], s1_done, 0));
    CHECK(cudaEventRecord(stop, streams[0]));
    CHECK(cudaEventSynchronize(stop));
    CHECK(cudaDeviceSynchronize());

    // A driver function fetched through the runtime's entry-point API (cuGetProcAddress
    // underneath), called directly: a route tracers must cover too.
    void *entry = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    CHECK(cudaGetDriverEntryPointByVersion("cuDriverGetVersion", &entry, 12000, cudaEnableDefault,
                                           &found));
    int driver_version = 0;
    using DriverGetVersion = int (*)(int *);
    if (found != cudaDriverEntryPointSuccess || entry == nullptr ||
        reinterpret_cast<DriverGetVersion>(entry)(&driver_version) != 0 || driver_version < 12000) {
        std::fprintf(stderr, "vector_add: cuDriverGetVersion through the entry-point API failed\n");
        return 1;
    }

    float ms = 0.0f;
    CHECK(cudaEventElapsedTime(&ms, start, stop));

    int bad = 0;
    for (int s = 0; s < kStreams; ++s) {
        const int adds = 1 + (kRepeats - 1 + s);  // copies of a in the result
        for (int i = 0; i < n; ++i) {
            const float want = ha[i] * adds + hb[i];
            if (std::fabs(hc[s][i] - want) > 1e-3f * (1.0f + std::fabs(want))) {
                if (bad < 5)
                    std::fprintf(stderr, "vector_add: stream %d index %d: got %f want %f\n", s,
                                 i, hc[s][i], want);
                ++bad;
            }
        }
    }

    CHECK(cudaEventDestroy(s1_done));
    CHECK(cudaEventDestroy(start));
    CHECK(cudaEventDestroy(stop));
    for (int s = 0; s < kStreams; ++s) {
        CHECK(cudaFree(da[s]));
        CHECK(cudaFree(db[s]));
        CHECK(cudaFree(dc[s]));
        CHECK(cudaStreamDestroy(streams[s]));
    }

    if (bad) {
        std::fprintf(stderr, "vector_add: %d wrong results\n", bad);
        return 1;
    }
    // The elapsed time varies from run to run: stderr, so stdout stays comparable.
    std::fprintf(stderr, "vector_add: %d elements, %d streams, %.3f ms\n", n, kStreams, ms);
    std::printf("vector_add: OK\n");
    return 0;
}
