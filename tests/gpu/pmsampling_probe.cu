// A standalone CUPTI 13 client that answers, on a real GPU, what `rtrace record --gpu-metrics`
// relies on (issue 21): CUPTI's PM Sampling API (cupti_pmsampling.h) with the Profiler Host API
// (cupti_profiler_host.h) for configuration and evaluation.
//   - the chip, the base metrics the host API lists for PM sampling (all written to a file),
//     which of the candidate metrics fit one pass together (greedy, in the order given);
//   - the trigger modes and sampling intervals SetConfig/Start accept and the sample durations
//     they give, hardware buffer sizes, counter data image sizes per sample count;
//   - decoding (stop reason, overflow, samples per image), sample timestamps against
//     cuptiGetTimestamp, CLOCK_MONOTONIC, CLOCK_REALTIME and the kernels' activity records;
//   - evaluated values per sample while a DRAM copy (1 GiB), an idle gap, an FMA kernel and a
//     WMMA fp16 tensor-core kernel run, beside activity tracing (CONCURRENT_KERNEL);
//   - the cost of sampling on a stream of short launches; overflow with a small buffer.
// Writes to argv[1]: base_metrics.txt, metrics.txt (the set that fits), config.bin,
// fixture-counterdata.bin and fixture-values.txt (16 samples and their values: a CI fixture),
// counterdata-N.bin (images as decoded), samples.csv (per sample: start, end, values),
// kernels.csv (activity records), clocks.txt.
// Lines starting "CHECK ok|bad name detail" are counted by pmsampling_probe.sh.
// Two more modes ask whether sampling sees another process's work (a sampler of its own beside
// the traced program): `pmsampling_probe watch SECONDS` samples device 0 (no work of its own)
// and prints `S start end values...` per sample and `M name` per metric; `pmsampling_probe
// load` runs the same phases (8 copies of 1 GiB, idle, FMA, idle, WMMA) and prints `K name
// start end` per kernel (CUPTI's activity records). pmsampling_cross.sh runs them together.
// Build: nvcc -arch=sm_90 -o pmsampling_probe pmsampling_probe.cu -lcupti -lcuda
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdarg>
#include <cmath>
#include <string>
#include <vector>
#include <algorithm>
#include <time.h>
#include <unistd.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <mma.h>
#include <cupti.h>
#include <cupti_target.h>
#include <cupti_profiler_target.h>
#include <cupti_profiler_host.h>
#include <cupti_pmsampling.h>

static const char *rs(CUptiResult r) { const char *s = "?"; cuptiGetResultString(r, &s); return s; }
#define CU(x) do { CUptiResult r_ = (x); if (r_ != CUPTI_SUCCESS) { \
    printf("FAIL %s: %d %s\n", #x, r_, rs(r_)); fflush(stdout); exit(1); } } while (0)
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    printf("FAIL %s: %s\n", #x, cudaGetErrorString(e_)); fflush(stdout); exit(1); } } while (0)
static void check(bool ok, const char *name, const char *fmt, ...) {
    char b[512]; va_list a; va_start(a, fmt); vsnprintf(b, sizeof b, fmt, a); va_end(a);
    printf("CHECK %s %s %s\n", ok ? "ok" : "bad", name, b); fflush(stdout);
}
static uint64_t clk(clockid_t c) { timespec t; clock_gettime(c, &t); return (uint64_t)t.tv_sec * 1000000000ull + t.tv_nsec; }
static uint64_t cupti_now() { uint64_t t = 0; cuptiGetTimestamp(&t); return t; }
static double now_ms() { return clk(CLOCK_MONOTONIC) / 1e6; }

// ---- activity records ----
struct Kernel { std::string name; uint64_t start, end; };
static std::vector<Kernel> kernels;
static void CUPTIAPI buf_req(uint8_t **b, size_t *size, size_t *max) {
    *size = 8 << 20; *b = (uint8_t *)aligned_alloc(8, *size); *max = 0;
}
static void CUPTIAPI buf_done(CUcontext, uint32_t, uint8_t *b, size_t, size_t valid) {
    CUpti_Activity *r = nullptr;
    while (cuptiActivityGetNextRecord(b, valid, &r) == CUPTI_SUCCESS)
        if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || r->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            auto *k = (CUpti_ActivityKernel10 *)r;
            kernels.push_back({k->name, k->start, k->end});
        }
    free(b);
}

// ---- kernels ----
__global__ void copy_kernel(const float4 *__restrict__ src, float4 *__restrict__ dst, size_t n) {
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
    // One warp per block: repeated 16x16x16 fp16 MMAs from shared operands, accumulator in
    // registers: the tensor pipe busy, DRAM quiet.
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    wmma::load_matrix_sync(a, A, 16);
    wmma::load_matrix_sync(b, B, 16);
    for (int i = 0; i < iters; i++) wmma::mma_sync(acc, a, b, acc);
    wmma::store_matrix_sync(C + blockIdx.x * 256 + (threadIdx.x / 32) * 0, acc, 16, wmma::mem_row_major);
}
__global__ void tiny_kernel(int *x) { x[threadIdx.x] += 1; }

// ---- host API helpers ----
struct HostObj {
    CUpti_Profiler_Host_Object *h = nullptr;
    HostObj(const char *chip, const uint8_t *avail) {
        CUpti_Profiler_Host_Initialize_Params p = {CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
        p.profilerType = CUPTI_PROFILER_TYPE_PM_SAMPLING; p.pChipName = chip; p.pCounterAvailabilityImage = avail;
        CU(cuptiProfilerHostInitialize(&p)); h = p.pHostObject;
    }
    ~HostObj() { CUpti_Profiler_Host_Deinitialize_Params p = {CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE}; p.pHostObject = h; cuptiProfilerHostDeinitialize(&p); }
};
// Config image for `names`; passes out (0 when AddMetrics refused them, with r).
static std::vector<uint8_t> config_for(const char *chip, const uint8_t *avail, const std::vector<std::string> &names,
                                       size_t *passes, CUptiResult *r) {
    HostObj ho(chip, avail);
    std::vector<const char *> c; for (auto &n : names) c.push_back(n.c_str());
    CUpti_Profiler_Host_ConfigAddMetrics_Params am = {CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
    am.pHostObject = ho.h; am.ppMetricNames = c.data(); am.numMetrics = c.size();
    *r = cuptiProfilerHostConfigAddMetrics(&am); *passes = 0;
    if (*r != CUPTI_SUCCESS) return {};
    CUpti_Profiler_Host_GetConfigImageSize_Params cs = {CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
    cs.pHostObject = ho.h; CU(cuptiProfilerHostGetConfigImageSize(&cs));
    std::vector<uint8_t> img(cs.configImageSize);
    CUpti_Profiler_Host_GetConfigImage_Params gc = {CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
    gc.pHostObject = ho.h; gc.configImageSize = img.size(); gc.pConfigImage = img.data(); CU(cuptiProfilerHostGetConfigImage(&gc));
    CUpti_Profiler_Host_GetNumOfPasses_Params np = {CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE};
    np.configImageSize = img.size(); np.pConfigImage = img.data(); CU(cuptiProfilerHostGetNumOfPasses(&np));
    *passes = np.numOfPasses;
    return img;
}

// ---- PM sampling helpers ----
static CUpti_PmSampling_Object *pm = nullptr;
static CUptiResult set_config(const std::vector<uint8_t> &config, size_t hwbuf, uint64_t interval,
                              CUpti_PmSampling_TriggerMode mode, CUpti_PmSampling_HardwareBuffer_AppendMode append) {
    CUpti_PmSampling_SetConfig_Params p = {CUpti_PmSampling_SetConfig_Params_STRUCT_SIZE};
    p.pPmSamplingObject = pm; p.configSize = config.size(); p.pConfig = config.data();
    p.hardwareBufferSize = hwbuf; p.samplingInterval = interval; p.triggerMode = mode; p.hwBufferAppendMode = append;
    return cuptiPmSamplingSetConfig(&p);
}
static CUptiResult start() { CUpti_PmSampling_Start_Params p = {CUpti_PmSampling_Start_Params_STRUCT_SIZE}; p.pPmSamplingObject = pm; return cuptiPmSamplingStart(&p); }
static CUptiResult stop() { CUpti_PmSampling_Stop_Params p = {CUpti_PmSampling_Stop_Params_STRUCT_SIZE}; p.pPmSamplingObject = pm; return cuptiPmSamplingStop(&p); }
// SetConfig again on a configured object; when CUPTI refuses, the object is disabled and
// enabled again first (printed, so the output says whether a re-SetConfig needs that).
static CUptiResult reconfigure(const std::vector<uint8_t> &config, size_t hwbuf, uint64_t interval,
                               CUpti_PmSampling_TriggerMode mode, CUpti_PmSampling_HardwareBuffer_AppendMode append) {
    CUptiResult r = set_config(config, hwbuf, interval, mode, append);
    if (r == CUPTI_SUCCESS) return r;
    printf("  SetConfig again refused (%s): disable, enable, SetConfig\n", rs(r));
    CUpti_PmSampling_Disable_Params di = {CUpti_PmSampling_Disable_Params_STRUCT_SIZE}; di.pPmSamplingObject = pm;
    cuptiPmSamplingDisable(&di);
    CUpti_PmSampling_Enable_Params en = {CUpti_PmSampling_Enable_Params_STRUCT_SIZE}; en.deviceIndex = 0;
    CU(cuptiPmSamplingEnable(&en)); pm = en.pPmSamplingObject;
    return set_config(config, hwbuf, interval, mode, append);
}
static std::vector<const char *> cnames;
static size_t image_size(uint32_t max_samples) {
    CUpti_PmSampling_GetCounterDataSize_Params p = {CUpti_PmSampling_GetCounterDataSize_Params_STRUCT_SIZE};
    p.pPmSamplingObject = pm; p.pMetricNames = cnames.data(); p.numMetrics = cnames.size(); p.maxSamples = max_samples;
    CU(cuptiPmSamplingGetCounterDataSize(&p)); return p.counterDataSize;
}
static void init_image(std::vector<uint8_t> &img) {
    CUpti_PmSampling_CounterDataImage_Initialize_Params p = {CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE};
    p.pPmSamplingObject = pm; p.counterDataSize = img.size(); p.pCounterData = img.data();
    CU(cuptiPmSamplingCounterDataImageInitialize(&p));
}
struct Decoded { CUptiResult r; int reason; int overflow; size_t total, populated, completed; double ms; };
static Decoded decode(std::vector<uint8_t> &img) {
    CUpti_PmSampling_DecodeData_Params p = {CUpti_PmSampling_DecodeData_Params_STRUCT_SIZE};
    p.pPmSamplingObject = pm; p.pCounterDataImage = img.data(); p.counterDataImageSize = img.size();
    double t0 = now_ms();
    Decoded d; d.r = cuptiPmSamplingDecodeData(&p); d.ms = now_ms() - t0;
    d.reason = p.decodeStopReason; d.overflow = p.overflow;
    CUpti_PmSampling_GetCounterDataInfo_Params i = {CUpti_PmSampling_GetCounterDataInfo_Params_STRUCT_SIZE};
    i.pCounterDataImage = img.data(); i.counterDataImageSize = img.size();
    CU(cuptiPmSamplingGetCounterDataInfo(&i));
    d.total = i.numTotalSamples; d.populated = i.numPopulatedSamples; d.completed = i.numCompletedSamples;
    return d;
}
static const char *reason_name(int r) {
    return r == CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL ? "COUNTER_DATA_FULL"
         : r == CUPTI_PM_SAMPLING_DECODE_STOP_REASON_END_OF_RECORDS ? "END_OF_RECORDS" : "OTHER";
}
static void sample_times(const std::vector<uint8_t> &img, size_t i, uint64_t *s, uint64_t *e) {
    CUpti_PmSampling_CounterData_GetSampleInfo_Params p = {CUpti_PmSampling_CounterData_GetSampleInfo_Params_STRUCT_SIZE};
    p.pPmSamplingObject = pm; p.pCounterDataImage = img.data(); p.counterDataImageSize = img.size(); p.sampleIndex = i;
    CU(cuptiPmSamplingCounterDataGetSampleInfo(&p)); *s = p.startTimestamp; *e = p.endTimestamp;
}
static void write_file(const std::string &path, const void *d, size_t n) {
    FILE *f = fopen(path.c_str(), "wb"); if (f) { fwrite(d, 1, n, f); fclose(f); }
}

struct Sample { uint64_t start, end; std::vector<double> v; };

// ---- the cross-process modes ----
static int load_main() {
    CU(cuptiActivityRegisterCallbacks(buf_req, buf_done));
    CU(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
    int nsm = prop.multiProcessorCount;
    const size_t N = (size_t)1 << 30;
    float4 *src, *dst; CK(cudaMalloc(&src, N)); CK(cudaMalloc(&dst, N));
    CK(cudaMemset(src, 1, N)); CK(cudaMemset(dst, 0, N));
    float *fout; CK(cudaMalloc(&fout, nsm * 8 * 1024 * sizeof(float)));
    half *A, *B; float *C; CK(cudaMalloc(&A, 256 * sizeof(half))); CK(cudaMalloc(&B, 256 * sizeof(half)));
    CK(cudaMemset(A, 0, 256 * sizeof(half))); CK(cudaMemset(B, 0, 256 * sizeof(half)));
    CK(cudaMalloc(&C, nsm * 16 * 256 * sizeof(float)));
    copy_kernel<<<nsm * 8, 512>>>(src, dst, N / 16);
    CK(cudaDeviceSynchronize());
    usleep(50000);
    for (int i = 0; i < 8; i++) copy_kernel<<<nsm * 8, 512>>>(src, dst, N / 16);
    CK(cudaDeviceSynchronize());
    usleep(30000);
    fma_kernel<<<nsm * 8, 1024>>>(fout, 200000);
    CK(cudaDeviceSynchronize());
    usleep(20000);
    wmma_kernel<<<nsm * 16, 32>>>(A, B, C, 400000);
    CK(cudaDeviceSynchronize());
    cuptiActivityFlushAll(1);
    for (auto &k : kernels) printf("K %s %llu %llu\n", k.name.c_str(), (unsigned long long)k.start, (unsigned long long)k.end);
    printf("bytes-per-copy %zu\n", N);
    return 0;
}

static int watch_main(double seconds) {
    CK(cudaFree(0));
    CUpti_Profiler_Initialize_Params ip = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
    CU(cuptiProfilerInitialize(&ip));
    CUpti_Device_GetChipName_Params cn = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};
    cn.deviceIndex = 0; CU(cuptiDeviceGetChipName(&cn));
    CUpti_PmSampling_GetCounterAvailability_Params ca = {CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE};
    ca.deviceIndex = 0; CU(cuptiPmSamplingGetCounterAvailability(&ca));
    std::vector<uint8_t> avail(ca.counterAvailabilityImageSize);
    ca.pCounterAvailabilityImage = avail.data(); CU(cuptiPmSamplingGetCounterAvailability(&ca));
    std::vector<std::string> names = {"sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
        "sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed",
        "dram__bytes_read.sum", "dram__bytes_write.sum"};
    for (auto &n : names) { cnames.push_back(n.c_str()); printf("M %s\n", n.c_str()); }
    size_t passes; CUptiResult cr;
    std::vector<uint8_t> config = config_for(cn.pChipName, avail.data(), names, &passes, &cr);
    if (cr != CUPTI_SUCCESS || passes != 1) { printf("FAIL config %d passes %zu\n", cr, passes); return 1; }
    CUpti_PmSampling_Enable_Params en = {CUpti_PmSampling_Enable_Params_STRUCT_SIZE};
    en.deviceIndex = 0; CU(cuptiPmSamplingEnable(&en)); pm = en.pPmSamplingObject;
    CU(set_config(config, (size_t)512 << 20, 100000, CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL,
                  CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST));
    std::vector<uint8_t> im(image_size(1000));
    HostObj eval(cn.pChipName, avail.data());
    size_t total = 0; int overflow = 0;
    auto drain = [&]() {
        for (int k = 0; k < 1000; k++) {
            init_image(im); Decoded d = decode(im); overflow |= d.overflow;
            if (d.r != CUPTI_SUCCESS) { printf("decode %s\n", rs(d.r)); break; }
            std::vector<double> v(cnames.size());
            for (size_t i = 0; i < d.completed; i++) {
                uint64_t a, b; sample_times(im, i, &a, &b);
                CUpti_Profiler_Host_EvaluateToGpuValues_Params ev = {CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
                ev.pHostObject = eval.h; ev.pCounterDataImage = im.data(); ev.counterDataImageSize = im.size();
                ev.rangeIndex = i; ev.ppMetricNames = cnames.data(); ev.numMetrics = cnames.size(); ev.pMetricValues = v.data();
                if (cuptiProfilerHostEvaluateToGpuValues(&ev) != CUPTI_SUCCESS) continue;
                printf("S %llu %llu", (unsigned long long)a, (unsigned long long)b);
                for (double x : v) printf(" %.9g", x);
                printf("\n");
                total++;
            }
            if (d.reason != CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL) break;
        }
    };
    CU(start());
    printf("started %llu\n", (unsigned long long)cupti_now());
    fflush(stdout);
    double t0 = now_ms();
    while (now_ms() - t0 < seconds * 1000) { usleep(50000); drain(); }
    double ts = now_ms(); CUptiResult sr = stop(); printf("stop %s %.2f ms\n", rs(sr), now_ms() - ts);
    drain();
    printf("samples %zu overflow %d\n", total, overflow);
    fflush(stdout);
    _exit(0);   // no Disable (it finalizes CUPTI 13.0: docs/gpu-validation.md)
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "load")) return load_main();
    if (argc > 2 && !strcmp(argv[1], "watch")) return watch_main(atof(argv[2]));
    std::string out = argc > 1 ? argv[1] : ".";
    const char *rate_env = getenv("PROBE_INTERVAL_NS");
    uint64_t interval_ns = rate_env ? strtoull(rate_env, 0, 10) : 100000;   // 10 kHz

    CU(cuptiActivityRegisterCallbacks(buf_req, buf_done));
    CU(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    CK(cudaFree(0));
    CUcontext ctx; cuCtxGetCurrent(&ctx);
    cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
    printf("device %s sms %d bus %d bits\n", prop.name, prop.multiProcessorCount, prop.memoryBusWidth);

    CUpti_Profiler_Initialize_Params ip = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
    CU(cuptiProfilerInitialize(&ip));
    CUpti_Profiler_DeviceSupported_Params ds = {CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE};
    ds.cuDevice = 0; ds.api = CUPTI_PROFILER_PM_SAMPLING;
    CUptiResult dsr = cuptiProfilerDeviceSupported(&ds);
    printf("pm sampling supported r=%d isSupported %d arch %d vgpu %d cc %d cmp %d wsl %d\n", dsr, ds.isSupported, ds.architecture, ds.vGpu, ds.confidentialCompute, ds.cmp, ds.wsl);
    CUpti_Device_GetChipName_Params cn = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};
    cn.deviceIndex = 0; CU(cuptiDeviceGetChipName(&cn));
    const char *chip = cn.pChipName;
    printf("chip %s\n", chip);
    check(chip && *chip, "chip", "%s", chip);

    CUpti_PmSampling_GetCounterAvailability_Params ca = {CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE};
    ca.deviceIndex = 0; CU(cuptiPmSamplingGetCounterAvailability(&ca));
    std::vector<uint8_t> avail(ca.counterAvailabilityImageSize);
    ca.pCounterAvailabilityImage = avail.data(); CU(cuptiPmSamplingGetCounterAvailability(&ca));
    printf("counter availability image %zu bytes\n", avail.size());
    write_file(out + "/availability.bin", avail.data(), avail.size());

    // ---- base metrics ----
    {
        HostObj ho(chip, avail.data());
        FILE *f = fopen((out + "/base_metrics.txt").c_str(), "w");
        const char *tn[] = {"counter", "ratio", "throughput"};
        size_t total = 0;
        for (int t = 0; t < 3; t++) {
            CUpti_Profiler_Host_GetBaseMetrics_Params bm = {CUpti_Profiler_Host_GetBaseMetrics_Params_STRUCT_SIZE};
            bm.pHostObject = ho.h; bm.metricType = (CUpti_MetricType)t;
            CUptiResult r = cuptiProfilerHostGetBaseMetrics(&bm);
            printf("base metrics %s: %zu (r %d)\n", tn[t], bm.numMetrics, r);
            for (size_t i = 0; r == CUPTI_SUCCESS && i < bm.numMetrics; i++) if (f) fprintf(f, "%s %s\n", tn[t], bm.ppMetricNames[i]);
            total += bm.numMetrics;
        }
        if (f) fclose(f);
        check(total > 0, "base-metrics", "%zu listed for PM sampling (base_metrics.txt)", total);
        CUpti_Profiler_Host_GetMaxNumHardwareMetricsPerPass_Params mp = {CUpti_Profiler_Host_GetMaxNumHardwareMetricsPerPass_Params_STRUCT_SIZE};
        mp.profilerType = CUPTI_PROFILER_TYPE_PM_SAMPLING; mp.pChipName = chip; mp.pCounterAvailabilityImage = avail.data();
        CUptiResult r = cuptiProfilerHostGetMaxNumHardwareMetricsPerPass(&mp);
        printf("max hardware metrics per pass (PM sampling): %zu (r %d)\n", mp.maxMetricsPerPass, r);
    }

    // ---- which candidates fit one pass (greedy in this order) ----
    const char *candidates[] = {
        "gpu__time_duration.sum",
        "sm__cycles_elapsed.avg.per_second",
        "sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
        "sm__issue_active.avg.pct_of_peak_sustained_elapsed",
        "sm__inst_executed_realtime.avg.pct_of_peak_sustained_elapsed",
        "sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed",
        "dram__bytes_read.sum", "dram__bytes_write.sum",
        "dram__bytes_read.sum.per_second", "dram__bytes_write.sum.per_second",
        "pcie__read_bytes.sum", "pcie__write_bytes.sum",
        "nvlrx__bytes.sum", "nvltx__bytes.sum",
        "sm__warps_active_realtime.avg.pct_of_peak_sustained_elapsed",
        "sm__warps_active.avg.pct_of_peak_sustained_elapsed",
        "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    };
    std::vector<std::string> fit;
    for (const char *m : candidates) {
        size_t passes; CUptiResult r;
        config_for(chip, avail.data(), {m}, &passes, &r);
        std::vector<std::string> t = fit; t.push_back(m);
        size_t passes_with; CUptiResult r2;
        config_for(chip, avail.data(), t, &passes_with, &r2);
        bool keep = r == CUPTI_SUCCESS && r2 == CUPTI_SUCCESS && passes_with == 1;
        printf("candidate %-75s alone: %s passes %zu; with the set so far: passes %zu -> %s\n", m,
               r == CUPTI_SUCCESS ? "ok" : rs(r), passes, passes_with, keep ? "kept" : "left out");
        if (keep) fit.push_back(m);
    }
    {
        FILE *f = fopen((out + "/metrics.txt").c_str(), "w");
        printf("one-pass set (%zu):", fit.size());
        for (auto &m : fit) { printf(" %s", m.c_str()); if (f) fprintf(f, "%s\n", m.c_str()); }
        printf("\n"); if (f) fclose(f);
    }
    for (auto &m : fit) cnames.push_back(m.c_str());
    size_t passes; CUptiResult cr;
    std::vector<uint8_t> config = config_for(chip, avail.data(), fit, &passes, &cr);
    check(cr == CUPTI_SUCCESS && passes == 1, "one-pass-config", "%zu metrics, config %zu bytes, passes %zu", fit.size(), config.size(), passes);
    write_file(out + "/config.bin", config.data(), config.size());
    {   // A config image of two passes: SetConfig must refuse it (header: NOT_SUPPORTED).
        std::vector<std::string> all(std::begin(candidates), std::end(candidates));
        size_t p2; CUptiResult r2; std::vector<uint8_t> c2 = config_for(chip, avail.data(), all, &p2, &r2);
        printf("all %zu candidates: passes %zu (r %d)\n", all.size(), p2, r2);
        if (r2 == CUPTI_SUCCESS && p2 > 1) {
            CUpti_PmSampling_Enable_Params en = {CUpti_PmSampling_Enable_Params_STRUCT_SIZE};
            en.deviceIndex = 0; CU(cuptiPmSamplingEnable(&en)); pm = en.pPmSamplingObject;
            CUptiResult r = set_config(c2, 64 << 20, 100000, CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL, CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST);
            printf("SetConfig with a %zu-pass config: %d %s\n", p2, r, rs(r));
            check(r != CUPTI_SUCCESS, "multi-pass-refused", "SetConfig -> %s", rs(r));
            CUpti_PmSampling_Disable_Params di = {CUpti_PmSampling_Disable_Params_STRUCT_SIZE}; di.pPmSamplingObject = pm; CU(cuptiPmSamplingDisable(&di));
        }
    }

    // ---- enable ----
    CUpti_PmSampling_Enable_Params en = {CUpti_PmSampling_Enable_Params_STRUCT_SIZE};
    en.deviceIndex = 0;
    double te = now_ms(); CU(cuptiPmSamplingEnable(&en)); pm = en.pPmSamplingObject;
    printf("enable took %.2f ms\n", now_ms() - te);
    {
        CUpti_PmSampling_Enable_Params en2 = {CUpti_PmSampling_Enable_Params_STRUCT_SIZE}; en2.deviceIndex = 0;
        CUptiResult r = cuptiPmSamplingEnable(&en2);
        printf("second enable on the same device: %d %s\n", r, rs(r));
    }
    for (uint32_t n : {1u, 2u, 10u, 100u, 1000u, 10000u, 100000u}) printf("counter data image for %u samples: %zu bytes\n", n, image_size(n));

    const size_t N = (size_t)1 << 30;                  // 1 GiB per buffer
    float4 *src, *dst; CK(cudaMalloc(&src, N)); CK(cudaMalloc(&dst, N));
    CK(cudaMemset(src, 1, N)); CK(cudaMemset(dst, 0, N));
    float *fout; CK(cudaMalloc(&fout, 132 * 8 * 1024 * sizeof(float)));
    half *A, *B; float *C; CK(cudaMalloc(&A, 256 * sizeof(half))); CK(cudaMalloc(&B, 256 * sizeof(half)));
    CK(cudaMemset(A, 0, 256 * sizeof(half))); CK(cudaMemset(B, 0, 256 * sizeof(half)));
    CK(cudaMalloc(&C, 132 * 16 * 256 * sizeof(float)));
    int *tiny; CK(cudaMalloc(&tiny, 1024 * sizeof(int))); CK(cudaMemset(tiny, 0, 4096));
    int nsm = prop.multiProcessorCount;
    // Warm-up (module load, clocks up), unsampled.
    copy_kernel<<<nsm * 8, 512>>>(src, dst, N / 16);
    fma_kernel<<<nsm * 8, 1024>>>(fout, 1000);
    wmma_kernel<<<nsm * 16, 32>>>(A, B, C, 1000);
    CK(cudaDeviceSynchronize());

    // ---- intervals and trigger modes: what SetConfig and Start accept, what the samples measure ----
    std::vector<uint8_t> img(image_size(5000));
    printf("probe image: %zu bytes for 5000 samples\n", img.size());
    struct Try { int mode; uint64_t interval; };
    Try tries[] = {{1, 1000000}, {1, 100000}, {1, 50000}, {1, 20000}, {1, 10000}, {1, 5000}, {1, 1000}, {1, 100},
                   {0, 100000}, {0, 1000000}};
    for (auto t : tries) {
        {   // A fresh object for each: does the interval of a SetConfig after the first one hold?
            CUpti_PmSampling_Disable_Params di = {CUpti_PmSampling_Disable_Params_STRUCT_SIZE}; di.pPmSamplingObject = pm;
            CU(cuptiPmSamplingDisable(&di));
            CUpti_PmSampling_Enable_Params e2 = {CUpti_PmSampling_Enable_Params_STRUCT_SIZE}; e2.deviceIndex = 0;
            CU(cuptiPmSamplingEnable(&e2)); pm = e2.pPmSamplingObject;
            // The image must be sized on the object that initializes it (run 2: INVALID_OPERATION).
            img.assign(image_size(5000), 0);
        }
        CUptiResult r = reconfigure(config, 64 << 20, t.interval, (CUpti_PmSampling_TriggerMode)t.mode, CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST);
        if (r != CUPTI_SUCCESS) { printf("interval %s %llu: SetConfig %s\n", t.mode ? "time ns" : "sysclk cycles", (unsigned long long)t.interval, rs(r)); continue; }
        r = start();
        if (r != CUPTI_SUCCESS) { printf("interval %s %llu: Start %s\n", t.mode ? "time ns" : "sysclk cycles", (unsigned long long)t.interval, rs(r)); continue; }
        uint64_t h0 = cupti_now();
        fma_kernel<<<nsm * 8, 1024>>>(fout, 20000); CK(cudaDeviceSynchronize());
        usleep(20000);
        uint64_t h1 = cupti_now();
        CU(stop());
        init_image(img);
        Decoded d = decode(img);
        uint64_t s0 = 0, e0 = 0, el = 0; double mean = 0, mn = 1e30, mx = 0;
        for (size_t i = 0; i < d.completed; i++) {
            uint64_t s, e; sample_times(img, i, &s, &e);
            if (i == 0) { s0 = s; e0 = e; } el = e;
            double w = (double)(e - s); mean += w; mn = std::min(mn, w); mx = std::max(mx, w);
        }
        if (d.completed) mean /= d.completed;
        printf("interval %s %llu: decode %s (%s) overflow %d samples total %zu populated %zu completed %zu over %.3f ms of host time; "
               "sample width mean %.0f min %.0f max %.0f ns; first [%llu, %llu] last end %llu; host cupti [%llu, %llu]\n",
               t.mode ? "time ns" : "sysclk cycles", (unsigned long long)t.interval, rs(d.r), reason_name(d.reason), d.overflow,
               d.total, d.populated, d.completed, (h1 - h0) / 1e6, mean, mn, mx,
               (unsigned long long)s0, (unsigned long long)e0, (unsigned long long)el, (unsigned long long)h0, (unsigned long long)h1);
        // Drain what is left, if anything.
        for (int k = 0; k < 10 && d.r == CUPTI_SUCCESS && d.reason == CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL; k++) { init_image(img); d = decode(img); }
    }
    for (size_t hw : {(size_t)1 << 20, (size_t)4 << 20, (size_t)64 << 20, (size_t)512 << 20, (size_t)2 << 30, (size_t)4 << 30}) {
        CUptiResult r = reconfigure(config, hw, 100000, CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL, CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST);
        printf("hardware buffer %zu MiB: SetConfig %s\n", hw >> 20, rs(r));
    }

    // ---- overflow: 1 MiB of hardware buffer at 1 us for 200 ms, KEEP_OLDEST then KEEP_LATEST ----
    for (int mode = 0; mode < 2; mode++) {
        uint64_t iv = 1000;
        CUptiResult r = reconfigure(config, 1 << 20, iv, CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL, (CUpti_PmSampling_HardwareBuffer_AppendMode)mode);
        if (r != CUPTI_SUCCESS) { iv = 10000; r = set_config(config, 1 << 20, iv, CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL, (CUpti_PmSampling_HardwareBuffer_AppendMode)mode); }
        if (r != CUPTI_SUCCESS) { printf("overflow test %d: SetConfig %s\n", mode, rs(r)); continue; }
        CU(start()); usleep(200000); CU(stop());
        size_t got = 0; int ovf = 0; Decoded d{};
        for (int k = 0; k < 50; k++) {
            init_image(img); d = decode(img); got += d.completed; ovf |= d.overflow;
            printf("  overflow test %s interval %llu ns: decode %d %s (%s) overflow %d completed %zu\n", mode ? "KEEP_LATEST" : "KEEP_OLDEST",
                   (unsigned long long)iv, d.r, rs(d.r), reason_name(d.reason), d.overflow, d.completed);
            if (d.r != CUPTI_SUCCESS || d.reason != CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL) break;
        }
        printf("overflow test %s: %zu samples decoded from 1 MiB, overflow seen %d (expected ~%llu samples)\n",
               mode ? "KEEP_LATEST" : "KEEP_OLDEST", got, ovf, (unsigned long long)(200000000ull / iv));
    }

    // ---- the main run: 10 kHz, copy / idle / FMA / idle / WMMA, decoding while sampling ----
    const uint32_t per_image = 1000;
    std::vector<uint8_t> im(image_size(per_image));
    CU(reconfigure(config, (size_t)512 << 20, interval_ns, CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL, CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST));
    cuptiActivityFlushAll(1); kernels.clear();
    std::vector<Sample> samples;
    HostObj eval(chip, avail.data());   // evaluates every decoded image
    int images_saved = 0; size_t decodes = 0; double decode_ms = 0; int overflow = 0;
    auto drain = [&](const char *when) {
        for (int k = 0; k < 1000; k++) {
            init_image(im); Decoded d = decode(im); decodes++; decode_ms += d.ms; overflow |= d.overflow;
            printf("  decode (%s): %s (%s) overflow %d total %zu populated %zu completed %zu in %.3f ms\n", when, rs(d.r),
                   reason_name(d.reason), d.overflow, d.total, d.populated, d.completed, d.ms);
            if (d.r != CUPTI_SUCCESS) break;
            std::vector<double> v(cnames.size());
            for (size_t i = 0; i < d.completed; i++) {
                Sample s; sample_times(im, i, &s.start, &s.end);
                CUpti_Profiler_Host_EvaluateToGpuValues_Params ev = {CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
                ev.pHostObject = eval.h; ev.pCounterDataImage = im.data(); ev.counterDataImageSize = im.size();
                ev.rangeIndex = i; ev.ppMetricNames = cnames.data(); ev.numMetrics = cnames.size(); ev.pMetricValues = v.data();
                CUptiResult r = cuptiProfilerHostEvaluateToGpuValues(&ev);
                if (r != CUPTI_SUCCESS) { printf("  evaluate sample %zu: %s\n", i, rs(r)); break; }
                s.v = v; samples.push_back(s);
            }
            {   // How much of the image is zero (what compression would leave).
                size_t nz = 0, last = 0;
                for (size_t b = 0; b < im.size(); b++) if (im[b]) { nz++; last = b; }
                printf("  image: %zu bytes, %zu nonzero, last nonzero at %zu, %zu completed samples\n", im.size(), nz, last, d.completed);
            }
            if (d.completed && images_saved < 2 && im.size() <= (8u << 20)) {  // 62.6 KB a sample: only small ones
                write_file(out + "/counterdata-" + std::to_string(images_saved) + ".bin", im.data(), im.size());
                images_saved++;
            }
            if (d.reason != CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL) break;
        }
    };
    FILE *clocks = fopen((out + "/clocks.txt").c_str(), "w");
    auto stamp = [&](const char *what) {
        uint64_t m0 = clk(CLOCK_MONOTONIC), c = cupti_now(), rt = clk(CLOCK_REALTIME), m1 = clk(CLOCK_MONOTONIC);
        printf("clock %s: cupti %llu realtime %llu monotonic %llu (+%llu ns) cupti-realtime %lld cupti-monotonic %lld\n", what,
               (unsigned long long)c, (unsigned long long)rt, (unsigned long long)m0, (unsigned long long)(m1 - m0),
               (long long)(c - rt), (long long)(c - m0));
        if (clocks) fprintf(clocks, "%s %llu %llu %llu\n", what, (unsigned long long)c, (unsigned long long)rt, (unsigned long long)m0);
    };
    stamp("before-start");
    uint64_t started = cupti_now();
    double t_start = now_ms(); CU(start()); double start_ms = now_ms() - t_start;
    stamp("after-start");
    usleep(10000);
    // Phase 1: 8 copies of 1 GiB (each reads 1 GiB and writes 1 GiB).
    for (int i = 0; i < 8; i++) copy_kernel<<<nsm * 8, 512>>>(src, dst, N / 16);
    CK(cudaDeviceSynchronize());
    stamp("after-copy");
    drain("while sampling, after the copies");
    usleep(30000);                                      // Phase 2: idle
    stamp("before-fma");
    fma_kernel<<<nsm * 8, 1024>>>(fout, 200000);        // Phase 3: FMA
    CK(cudaDeviceSynchronize());
    usleep(20000);                                      // idle
    stamp("before-wmma");
    wmma_kernel<<<nsm * 16, 32 * 1>>>(A, B, C, 400000); // Phase 4: tensor cores
    CK(cudaDeviceSynchronize());
    usleep(10000);
    stamp("before-stop");
    double t_stop = now_ms(); CU(stop()); double stop_ms = now_ms() - t_stop;
    stamp("after-stop");
    drain("after stop");
    if (clocks) fclose(clocks);
    cuptiActivityFlushAll(1);
    printf("start %.3f ms stop %.3f ms; %zu decodes %.3f ms in all; %zu samples; overflow %d; %d images saved\n",
           start_ms, stop_ms, decodes, decode_ms, samples.size(), overflow, images_saved);
    check(!samples.empty(), "samples", "%zu samples at %llu ns", samples.size(), (unsigned long long)interval_ns);
    check(!overflow, "no-overflow", "512 MiB hardware buffer at %llu ns", (unsigned long long)interval_ns);

    // samples.csv
    {
        FILE *f = fopen((out + "/samples.csv").c_str(), "w");
        if (f) {
            fprintf(f, "start,end"); for (auto n : cnames) fprintf(f, ",%s", n); fprintf(f, "\n");
            for (auto &s : samples) {
                fprintf(f, "%llu,%llu", (unsigned long long)s.start, (unsigned long long)s.end);
                for (double v : s.v) fprintf(f, ",%.17g", v);
                fprintf(f, "\n");
            }
            fclose(f);
        }
        f = fopen((out + "/kernels.csv").c_str(), "w");
        if (f) { fprintf(f, "name,start,end\n"); for (auto &k : kernels) fprintf(f, "%s,%llu,%llu\n", k.name.c_str(), (unsigned long long)k.start, (unsigned long long)k.end); fclose(f); }
    }
    std::sort(kernels.begin(), kernels.end(), [](const Kernel &a, const Kernel &b) { return a.start < b.start; });
    printf("kernel activity records during sampling: %zu\n", kernels.size());
    check(kernels.size() == 10, "activity-beside-sampling", "%zu kernel records (expected 10: 8 copies, fma, wmma)", kernels.size());
    if (samples.empty() || kernels.empty()) { printf("nothing to compare\n"); return 0; }
    // Sample spacing and gaps.
    {
        uint64_t gaps = 0, overlaps = 0; double w = 0;
        for (size_t i = 0; i < samples.size(); i++) {
            w += samples[i].end - samples[i].start;
            if (i && samples[i].start != samples[i - 1].end) { if (samples[i].start > samples[i - 1].end) gaps++; else overlaps++; }
        }
        printf("samples: first start %llu last end %llu, mean width %.1f ns, %llu gaps, %llu overlaps between neighbours\n",
               (unsigned long long)samples.front().start, (unsigned long long)samples.back().end, w / samples.size(),
               (unsigned long long)gaps, (unsigned long long)overlaps);
        printf("Start called at %llu: first sample [%llu, %llu], second starts %llu\n", (unsigned long long)started,
               (unsigned long long)samples[0].start, (unsigned long long)samples[0].end,
               (unsigned long long)(samples.size() > 1 ? samples[1].start : 0));
        printf("first kernel start %llu (after first sample start by %lld ns)\n", (unsigned long long)kernels.front().start,
               (long long)(kernels.front().start - samples.front().start));
    }
    auto col = [&](const char *name) -> int { for (size_t i = 0; i < cnames.size(); i++) if (!strcmp(cnames[i], name)) return (int)i; return -1; };
    // Overlap-weighted average of metric `c` over [a, b]; covered = share of [a, b] inside samples.
    auto avg = [&](int c, uint64_t a, uint64_t b, double *covered) -> double {
        double sum = 0, wsum = 0;
        for (auto &s : samples) {
            uint64_t lo = std::max(a, s.start), hi = std::min(b, s.end);
            if (hi <= lo || c < 0) continue;
            double w = (double)(hi - lo); sum += s.v[c] * w; wsum += w;
        }
        if (covered) *covered = b > a ? wsum / (double)(b - a) : 0;
        return wsum > 0 ? sum / wsum : 0;
    };
    // Bytes of a `.sum` metric within [a, b]: each sample's count times the share of it inside.
    auto bytes = [&](int c, uint64_t a, uint64_t b) -> double {
        double sum = 0;
        for (auto &s : samples) {
            uint64_t lo = std::max(a, s.start), hi = std::min(b, s.end);
            if (hi <= lo || c < 0 || s.end <= s.start) continue;
            sum += s.v[c] * (double)(hi - lo) / (double)(s.end - s.start);
        }
        return sum;
    };
    int c_sm = col("sm__cycles_active.avg.pct_of_peak_sustained_elapsed");
    int c_issue = col("sm__issue_active.avg.pct_of_peak_sustained_elapsed");
    int c_tensor = col("sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed");
    int c_rd = col("dram__bytes_read.sum"), c_wr = col("dram__bytes_write.sum");
    int c_rdps = col("dram__bytes_read.sum.per_second"), c_wrps = col("dram__bytes_write.sum.per_second");
    int c_warps = col("sm__warps_active_realtime.avg.pct_of_peak_sustained_elapsed");
    int c_dur = col("gpu__time_duration.sum");
    if (c_dur >= 0) {
        double r = 0; for (auto &s : samples) r += s.v[c_dur] / (double)(s.end - s.start);
        printf("gpu__time_duration.sum / (end - start), mean over samples: %.6f\n", r / samples.size());
    }
    printf("%-14s %12s %9s %8s %8s %8s %8s %10s %10s %12s\n", "kernel", "dur_us", "covered", "sm%", "issue%", "tensor%", "warps%", "rd_GB/s", "wr_GB/s", "expect_GB/s");
    for (auto &k : kernels) {
        double cov; double sm = avg(c_sm, k.start, k.end, &cov);
        double dur = (double)(k.end - k.start);
        double rd = bytes(c_rd, k.start, k.end) / dur, wr = bytes(c_wr, k.start, k.end) / dur;
        bool copy = k.name.find("copy") != std::string::npos;
        std::string shortname = k.name.substr(0, 14);
        printf("%-14s %12.1f %9.3f %8.2f %8.2f %8.2f %8.2f %10.1f %10.1f %12.1f\n", shortname.c_str(), dur / 1e3, cov, sm,
               avg(c_issue, k.start, k.end, 0), avg(c_tensor, k.start, k.end, 0), avg(c_warps, k.start, k.end, 0), rd, wr,
               copy ? (double)N / dur : 0.0);
    }
    // The copy phase as a whole: first copy start .. last copy end.
    uint64_t ca0 = kernels[0].start, ca1 = kernels[7].end; double busy = 0;
    for (int i = 0; i < 8; i++) busy += kernels[i].end - kernels[i].start;
    double rdb = bytes(c_rd, ca0, ca1), wrb = bytes(c_wr, ca0, ca1);
    double expect = 8.0 * N;
    printf("copies: sampled dram read %.4g B write %.4g B over the phase; expected %.4g each; busy %.3f ms of %.3f ms\n",
           rdb, wrb, expect, busy / 1e6, (ca1 - ca0) / 1e6);
    printf("copies: sampled read throughput %.1f GB/s (per_second metric %.1f GB/s), bytes/duration %.1f GB/s\n",
           rdb / (ca1 - ca0), avg(c_rdps, ca0, ca1, 0) / 1e9, expect / (ca1 - ca0));
    check(fabs(rdb / expect - 1) < 0.05, "dram-read-bytes", "sampled %.4g vs %.4g (%.2f%%)", rdb, expect, 100 * (rdb / expect - 1));
    check(fabs(wrb / expect - 1) < 0.05, "dram-write-bytes", "sampled %.4g vs %.4g (%.2f%%)", wrb, expect, 100 * (wrb / expect - 1));
    (void)c_wrps;
    const Kernel &fk = kernels[8], &wk = kernels[9];
    double sm_f = avg(c_sm, fk.start, fk.end, 0), t_f = avg(c_tensor, fk.start, fk.end, 0), t_w = avg(c_tensor, wk.start, wk.end, 0);
    double sm_idle = avg(c_sm, ca1 + 5000000, fk.start - 5000000, 0), t_idle = avg(c_tensor, ca1 + 5000000, fk.start - 5000000, 0);
    check(sm_f > 90, "sm-active-fma", "%.2f%% during the FMA kernel", sm_f);
    check(sm_idle < 5, "sm-idle-gap", "%.2f%% in the idle gap", sm_idle);
    check(t_w > 10 && t_f < 1 && t_idle < 1, "tensor-only-wmma", "tensor %.2f%% during WMMA, %.2f%% during FMA, %.2f%% idle", t_w, t_f, t_idle);

    // ---- cost: 2000 tiny launches + sync, without and with sampling ----
    auto tiny_run = [&]() { double t0 = now_ms(); for (int i = 0; i < 2000; i++) tiny_kernel<<<1, 32>>>(tiny); CK(cudaDeviceSynchronize()); return now_ms() - t0; };
    auto fma_run = [&]() { double t0 = now_ms(); fma_kernel<<<nsm * 8, 1024>>>(fout, 50000); CK(cudaDeviceSynchronize()); return now_ms() - t0; };
    double base_t = 1e9, samp_t = 1e9, base_f = 1e9, samp_f = 1e9;
    for (int r = 0; r < 3; r++) { base_t = std::min(base_t, tiny_run()); base_f = std::min(base_f, fma_run()); }
    CU(reconfigure(config, (size_t)512 << 20, interval_ns, CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL, CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST));
    CU(start());
    for (int r = 0; r < 3; r++) { samp_t = std::min(samp_t, tiny_run()); samp_f = std::min(samp_f, fma_run()); }
    CU(stop());
    samples.clear(); images_saved = 2; drain("after cost run");
    printf("cost: 2000 tiny launches %.3f ms unsampled, %.3f ms sampled at %llu ns (%+.1f%%); FMA kernel %.3f vs %.3f ms (%+.1f%%)\n",
           base_t, samp_t, (unsigned long long)interval_ns, 100 * (samp_t / base_t - 1), base_f, samp_f, 100 * (samp_f / base_f - 1));
    {   // A CI fixture: an image of 16 samples (about 1 MB) over an FMA kernel, its values as
        // evaluated here, the metric names and the chip (the collector's test evaluates the
        // image with the host library and must get these values exactly).
        std::vector<uint8_t> small(image_size(16));
        CU(reconfigure(config, (size_t)64 << 20, 1000000, CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL, CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST));
        CU(start());
        fma_kernel<<<nsm * 8, 1024>>>(fout, 100000); CK(cudaDeviceSynchronize());
        usleep(5000);
        CU(stop());
        init_image(small);
        Decoded d = decode(small);
        printf("fixture image: %zu bytes, decode %s (%s), %zu completed samples\n", small.size(), rs(d.r), reason_name(d.reason), d.completed);
        write_file(out + "/fixture-counterdata.bin", small.data(), small.size());
        FILE *f = fopen((out + "/fixture-values.txt").c_str(), "w");
        if (f) {
            fprintf(f, "chip %s\nsamples %zu\n", chip, d.completed);
            for (auto n : cnames) fprintf(f, "metric %s\n", n);
            std::vector<double> v(cnames.size());
            for (size_t i = 0; i < d.completed; i++) {
                CUpti_Profiler_Host_EvaluateToGpuValues_Params ev = {CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
                ev.pHostObject = eval.h; ev.pCounterDataImage = small.data(); ev.counterDataImageSize = small.size();
                ev.rangeIndex = i; ev.ppMetricNames = cnames.data(); ev.numMetrics = cnames.size(); ev.pMetricValues = v.data();
                CUptiResult r = cuptiProfilerHostEvaluateToGpuValues(&ev);
                uint64_t a, b; sample_times(small, i, &a, &b);
                fprintf(f, "sample %zu %llu %llu r=%d", i, (unsigned long long)a, (unsigned long long)b, r);
                for (double x : v) fprintf(f, " %.17g", x);
                fprintf(f, "\n");
            }
            fclose(f);
        }
        check(d.completed > 0, "fixture", "%zu samples in fixture-counterdata.bin", d.completed);
        for (int k = 0; k < 20 && d.reason == CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL; k++) { init_image(small); d = decode(small); }
    }
    CUpti_PmSampling_Disable_Params di = {CUpti_PmSampling_Disable_Params_STRUCT_SIZE}; di.pPmSamplingObject = pm;
    double td = now_ms(); CU(cuptiPmSamplingDisable(&di)); printf("disable took %.2f ms\n", now_ms() - td);
    return 0;
}
