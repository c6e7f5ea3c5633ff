// What CUPTI's activity API costs the host per launch on a launch-bound loop of empty kernels,
// with only the GPU-side kinds rtrace needs (kernel, memcpy, memset) and no API records.
// Prints the median host µs per launch with and without CUPTI, and how many kernel records
// CUPTI delivered.
//   nvcc -O2 -o cupti_cost tools/bench/cupti_cost.cu -I$CUPTI/include -L$CUPTI/lib64 -lcupti
#include <cuda_runtime.h>
#include <cupti.h>
#include <initializer_list>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

__global__ void empty() {}

#define CK(x) do { auto e_ = (x); if (e_ != 0) { std::fprintf(stderr, "%s:%d %s -> %d\n", __FILE__, __LINE__, #x, (int)e_); std::exit(1); } } while (0)

static std::atomic<long> kernels{0};
static std::atomic<long> externals{0};
static std::atomic<long> apis{0};

static void CUPTIAPI request(uint8_t **buf, size_t *size, size_t *max) {
    *size = 8 << 20;
    *buf = static_cast<uint8_t *>(std::aligned_alloc(8, *size));
    *max = 0;
}

static void CUPTIAPI complete(CUcontext, uint32_t, uint8_t *buf, size_t, size_t valid) {
    CUpti_Activity *rec = nullptr;
    while (cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS)
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) kernels++;
        else if (rec->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) externals++;
        else if (rec->kind == CUPTI_ACTIVITY_KIND_DRIVER) apis++;
    std::free(buf);
}

static double loop(cudaStream_t s, int n, bool correlate = false) {
    CK(cudaStreamSynchronize(s));
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; i++) {
        if (correlate) CK(cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, i + 1));
        empty<<<1, 1, 0, s>>>();
        if (correlate) {
            uint64_t id;
            CK(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, &id));
        }
    }
    auto t1 = std::chrono::steady_clock::now();
    CK(cudaStreamSynchronize(s));
    return std::chrono::duration<double, std::micro>(t1 - t0).count() / n;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? std::atoi(argv[1]) : 20000;
    int reps = argc > 2 ? std::atoi(argv[2]) : 7;
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    loop(s, 100);
    CK(cuptiActivityRegisterCallbacks(request, complete));
    std::vector<double> plain, traced, correlated, all_api;
    for (int r = 0; r < reps; r++) {
        plain.push_back(loop(s, n));
        CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
        CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
        CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
        traced.push_back(loop(s, n));
        CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION));
        // API records only for the launch calls: external correlation records need them.
        for (CUpti_CallbackId cb : {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
                                    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz})
            CK(cuptiActivityEnableDriverApi(cb, 1));
        correlated.push_back(loop(s, n, true));
        for (CUpti_CallbackId cb : {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
                                    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz})
            CK(cuptiActivityEnableDriverApi(cb, 0));
        long before = apis.load();
        CK(cuptiActivityFlushAll(1));
        std::printf("launch-only API records this rep: %ld\n", apis.load() - before);
        CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER));
        all_api.push_back(loop(s, n, true));
        CK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_DRIVER));
        CK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION));
        CK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
        CK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMCPY));
        CK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMSET));
        CK(cuptiActivityFlushAll(1));
    }
    auto med = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
    std::printf("plain %.3f us/launch; cupti kernel+memcpy+memset %.3f (adds %.3f); "
                "+ launch API records and external correlation push/pop %.3f (adds %.3f); %ld kernel "
                "records, %ld external correlation records, %ld API records for %d launches\n",
                med(plain), med(traced), med(traced) - med(plain), med(correlated),
                med(correlated) - med(plain), kernels.load(), externals.load(), apis.load(), 3 * reps * n);
    std::printf("all driver API records + external correlation: %.3f us/launch (adds %.3f)\n", med(all_api),
                med(all_api) - med(plain));
    return 0;
}
