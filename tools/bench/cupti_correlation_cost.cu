// Ways to learn CUPTI's correlation id of each launch (to link CUPTI's kernel records to
// rtrace's API records), and what each costs per launch on a launch-bound loop.
//   nvcc -O2 -o ccc tools/bench/cupti_correlation_cost.cu -I$CUPTI/include -L$CUPTI/lib64 -lcupti
//   ./ccc MODE [launches] [reps]     MODE: none | activity | callbacks | driverapi
// none       no CUPTI
// activity   kernel activity only
// callbacks  kernel activity + a CUPTI callback on launch API enter (reads correlationId)
// driverapi  kernel activity + cuptiActivityEnableDriverApi for the launch cbids (set before
//            anything else) + external correlation push/pop around each launch
#include <cuda_runtime.h>
#include <cupti.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

__global__ void empty() {}
#define CK(x) do { auto e_ = (x); if (e_ != 0) { std::fprintf(stderr, "%s:%d %s -> %d\n", __FILE__, __LINE__, #x, (int)e_); std::exit(1); } } while (0)

static std::atomic<long> kernels{0}, externals{0}, apis{0}, callbacks{0};
static thread_local uint32_t last_corr;

static void CUPTIAPI request(uint8_t **buf, size_t *size, size_t *max) {
    *size = 8 << 20; *buf = static_cast<uint8_t *>(std::aligned_alloc(8, *size)); *max = 0;
}
static void CUPTIAPI complete(CUcontext, uint32_t, uint8_t *buf, size_t, size_t valid) {
    CUpti_Activity *rec = nullptr;
    while (cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) kernels++;
        else if (rec->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) externals++;
        else if (rec->kind == CUPTI_ACTIVITY_KIND_DRIVER) apis++;
    }
    std::free(buf);
}
static void CUPTIAPI on_api(void *, CUpti_CallbackDomain, CUpti_CallbackId, const void *data) {
    auto *info = static_cast<const CUpti_CallbackData *>(data);
    if (info->callbackSite == CUPTI_API_ENTER) { last_corr = info->correlationId; callbacks++; }
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "none";
    int n = argc > 2 ? std::atoi(argv[2]) : 20000, reps = argc > 3 ? std::atoi(argv[3]) : 7;
    bool cupti = std::strcmp(mode, "none") != 0;
    CUpti_CallbackId cbids[] = {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
                                CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz};
    if (!std::strcmp(mode, "driverapi"))
        for (auto cb : cbids) CK(cuptiActivityEnableDriverApi(cb, 1));
    if (cupti) {
        CK(cuptiActivityRegisterCallbacks(request, complete));
        CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    }
    if (!std::strcmp(mode, "driverapi")) CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION));
    if (!std::strcmp(mode, "callbacks")) {
        CUpti_SubscriberHandle sub;
        CK(cuptiSubscribe(&sub, (CUpti_CallbackFunc)on_api, nullptr));
        for (auto cb : cbids) CK(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, cb));
    }
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    std::vector<double> t;
    bool push = !std::strcmp(mode, "driverapi");
    for (int r = 0; r < reps + 1; r++) {
        CK(cudaStreamSynchronize(s));
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < n; i++) {
            if (push) CK(cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, i + 1));
            empty<<<1, 1, 0, s>>>();
            if (push) { uint64_t id; CK(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, &id)); }
        }
        auto t1 = std::chrono::steady_clock::now();
        CK(cudaStreamSynchronize(s));
        if (r > 0) t.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / n);
    }
    if (cupti) CK(cuptiActivityFlushAll(1));
    std::sort(t.begin(), t.end());
    std::printf("%-10s %.3f us/launch  kernels %ld api %ld external %ld callbacks %ld (launches %d)\n", mode,
                t[t.size() / 2], kernels.load(), apis.load(), externals.load(), callbacks.load(), (reps + 1) * n);
    return 0;
}
