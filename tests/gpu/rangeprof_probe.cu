// A standalone CUPTI 13 client that answers, on a real GPU, what librtrace.so's kernel
// profiling relies on: the Range Profiler in auto range + kernel replay around single
// launches while activity tracing runs (kernel records per profiled launch, range names,
// whether SetConfig is needed per launch, device memory restored between passes, cost).
// Writes each profiled launch's counter data image and values under argv[1] (fixtures).
// Build: nvcc -o rangeprof_probe rangeprof_probe.cu -lcupti -lcuda
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <chrono>
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <cupti_target.h>
#include <cupti_profiler_target.h>
#include <cupti_profiler_host.h>
#include <cupti_range_profiler.h>

#define CU(x) do { CUptiResult r = (x); if (r != CUPTI_SUCCESS) { const char *s; \
    cuptiGetResultString(r, &s); printf("FAIL %s: %d %s\n", #x, r, s); exit(1); } } while (0)

static int kernels_seen = 0;
static std::vector<unsigned> kernel_corr;
static void CUPTIAPI buf_req(uint8_t **b, size_t *size, size_t *max) {
    *size = 1 << 20; *b = (uint8_t *)aligned_alloc(8, *size); *max = 0;
}
static void CUPTIAPI buf_done(CUcontext, uint32_t, uint8_t *b, size_t, size_t valid) {
    CUpti_Activity *r = nullptr;
    while (cuptiActivityGetNextRecord(b, valid, &r) == CUPTI_SUCCESS) {
        if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || r->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            auto *k = (CUpti_ActivityKernel10 *)r;
            kernels_seen++; kernel_corr.push_back(k->correlationId);
            printf("activity kernel %s corr %u dur %llu ns\n", k->name, k->correlationId,
                   (unsigned long long)(k->end - k->start));
        }
    }
    free(b);
}

__global__ void increment(int *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1;
}
__global__ void bank_conflicts(float *out, int iters) {
    __shared__ float s[32 * 256];
    int t = threadIdx.x;
    for (int i = 0; i < 32; i++) s[t * 32 + i] = t + i;
    __syncthreads();
    float acc = 0;
    for (int k = 0; k < iters; k++) acc += s[(t * 32 + k) % (32 * 256)];
    out[blockIdx.x * blockDim.x + t] = acc;
}

static double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int main(int argc, char **argv) {
    const char *outdir = argc > 1 ? argv[1] : ".";
    const char *list = argc > 2 ? argv[2] : "gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed";
    int setconfig_each = getenv("PROBE_SETCONFIG_EACH") ? atoi(getenv("PROBE_SETCONFIG_EACH")) : 1;
    std::vector<std::string> names;
    { std::string s(list); size_t p = 0; while (p <= s.size()) { size_t q = s.find(',', p); if (q == std::string::npos) q = s.size();
      if (q > p) names.push_back(s.substr(p, q - p)); p = q + 1; } }
    std::vector<const char *> cnames; for (auto &n : names) cnames.push_back(n.c_str());

    CU(cuptiActivityRegisterCallbacks(buf_req, buf_done));
    CU(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    cudaFree(0);
    CUcontext ctx; cuCtxGetCurrent(&ctx);
    uint32_t ctx_id = 0; CU(cuptiGetContextId(ctx, &ctx_id));
    printf("context id %u\n", ctx_id);

    CUpti_Profiler_Initialize_Params ip = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
    CU(cuptiProfilerInitialize(&ip));
    CUpti_Profiler_DeviceSupported_Params ds = {CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE};
    ds.cuDevice = 0; ds.api = CUPTI_PROFILER_RANGE_PROFILING;
    CU(cuptiProfilerDeviceSupported(&ds));
    printf("supported %d arch %d sli %d vgpu %d cc %d cmp %d wsl %d\n", ds.isSupported, ds.architecture, ds.sli, ds.vGpu, ds.confidentialCompute, ds.cmp, ds.wsl);
    CUpti_Device_GetChipName_Params cn = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};
    cn.deviceIndex = 0; CU(cuptiDeviceGetChipName(&cn));
    printf("chip %s\n", cn.pChipName);
    CUpti_Profiler_GetCounterAvailability_Params ca = {CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE};
    ca.ctx = ctx; CU(cuptiProfilerGetCounterAvailability(&ca));
    std::vector<uint8_t> avail(ca.counterAvailabilityImageSize);
    ca.pCounterAvailabilityImage = avail.data(); CU(cuptiProfilerGetCounterAvailability(&ca));
    printf("availability image %zu bytes\n", avail.size());

    CUpti_Profiler_Host_Initialize_Params hi = {CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
    hi.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER; hi.pChipName = cn.pChipName; hi.pCounterAvailabilityImage = avail.data();
    CU(cuptiProfilerHostInitialize(&hi));
    CUpti_Profiler_Host_ConfigAddMetrics_Params am = {CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
    am.pHostObject = hi.pHostObject; am.ppMetricNames = cnames.data(); am.numMetrics = cnames.size();
    CU(cuptiProfilerHostConfigAddMetrics(&am));
    CUpti_Profiler_Host_GetConfigImageSize_Params cs = {CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
    cs.pHostObject = hi.pHostObject; CU(cuptiProfilerHostGetConfigImageSize(&cs));
    std::vector<uint8_t> config(cs.configImageSize);
    CUpti_Profiler_Host_GetConfigImage_Params gc = {CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
    gc.pHostObject = hi.pHostObject; gc.configImageSize = config.size(); gc.pConfigImage = config.data();
    CU(cuptiProfilerHostGetConfigImage(&gc));
    CUpti_Profiler_Host_GetNumOfPasses_Params np = {CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE};
    np.configImageSize = config.size(); np.pConfigImage = config.data();
    CU(cuptiProfilerHostGetNumOfPasses(&np));
    printf("metrics %zu passes %zu config %zu bytes\n", cnames.size(), np.numOfPasses, config.size());

    CUpti_RangeProfiler_Enable_Params en = {CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE};
    en.ctx = ctx; CU(cuptiRangeProfilerEnable(&en));
    CUpti_RangeProfiler_GetCounterDataSize_Params gs = {CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE};
    gs.pRangeProfilerObject = en.pRangeProfilerObject; gs.pMetricNames = cnames.data(); gs.numMetrics = cnames.size();
    gs.maxNumOfRanges = 1; gs.maxNumRangeTreeNodes = 1;
    CU(cuptiRangeProfilerGetCounterDataSize(&gs));
    std::vector<uint8_t> image(gs.counterDataSize);
    printf("counter data %zu bytes\n", image.size());

    const int n = 1 << 22; int *x; float *out;
    cudaMalloc(&x, n * sizeof(int)); cudaMemset(x, 0, n * sizeof(int)); cudaMalloc(&out, 264 * 256 * sizeof(float));
    auto configure = [&]() {
        CUpti_RangeProfiler_CounterDataImage_Initialize_Params ii = {CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE};
        ii.pRangeProfilerObject = en.pRangeProfilerObject; ii.counterDataSize = image.size(); ii.pCounterData = image.data();
        CU(cuptiRangeProfilerCounterDataImageInitialize(&ii));
        CUpti_RangeProfiler_SetConfig_Params sc = {CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE};
        sc.pRangeProfilerObject = en.pRangeProfilerObject; sc.configSize = config.size(); sc.pConfig = config.data();
        sc.counterDataImageSize = image.size(); sc.pCounterDataImage = image.data();
        sc.range = CUPTI_AutoRange; sc.replayMode = CUPTI_KernelReplay; sc.maxRangesPerPass = 1;
        sc.numNestingLevels = 1; sc.minNestingLevel = 1; sc.passIndex = 0; sc.targetNestingLevel = 1;
        CU(cuptiRangeProfilerSetConfig(&sc));
    };
    configure();
    for (int l = 0; l < 6; l++) {
        bool conflicts = l % 2;
        // An unprofiled launch first: it must run untouched.
        increment<<<n / 256, 256>>>(x, n);
        if (l > 0) {
            if (setconfig_each) configure();
            else {
                CUpti_RangeProfiler_CounterDataImage_Initialize_Params ii = {CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE};
                ii.pRangeProfilerObject = en.pRangeProfilerObject; ii.counterDataSize = image.size(); ii.pCounterData = image.data();
                CU(cuptiRangeProfilerCounterDataImageInitialize(&ii));
            }
        }
        double t0 = now_ms();
        double ta = t0;
        CUpti_RangeProfiler_Start_Params st = {CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
        st.pRangeProfilerObject = en.pRangeProfilerObject; CU(cuptiRangeProfilerStart(&st));
        double tb = now_ms();
        if (conflicts) bank_conflicts<<<264, 256>>>(out, 4096); else increment<<<n / 256, 256>>>(x, n);
        double tc = now_ms();
        CUpti_RangeProfiler_Stop_Params sp = {CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
        sp.pRangeProfilerObject = en.pRangeProfilerObject; CU(cuptiRangeProfilerStop(&sp));
        CUpti_RangeProfiler_DecodeData_Params dd = {CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE};
        double td = now_ms();
        dd.pRangeProfilerObject = en.pRangeProfilerObject; CU(cuptiRangeProfilerDecodeData(&dd));
        double t1 = now_ms();
        printf("  timing: start %.2f launch %.2f stop %.2f decode %.2f ms\n", tb - ta, tc - tb, td - tc, t1 - td);
        CUpti_RangeProfiler_GetCounterDataInfo_Params gi = {CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE};
        gi.pCounterDataImage = image.data(); gi.counterDataImageSize = image.size();
        CU(cuptiRangeProfilerGetCounterDataInfo(&gi));
        CUpti_RangeProfiler_CounterData_GetRangeInfo_Params ri = {CUpti_RangeProfiler_CounterData_GetRangeInfo_Params_STRUCT_SIZE};
        ri.pCounterDataImage = image.data(); ri.counterDataImageSize = image.size(); ri.rangeIndex = 0; ri.rangeDelimiter = "/";
        CU(cuptiRangeProfilerCounterDataGetRangeInfo(&ri));
        std::vector<double> values(cnames.size());
        CUpti_Profiler_Host_EvaluateToGpuValues_Params ev = {CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
        ev.pHostObject = hi.pHostObject; ev.pCounterDataImage = image.data(); ev.counterDataImageSize = image.size();
        ev.rangeIndex = 0; ev.ppMetricNames = cnames.data(); ev.numMetrics = cnames.size(); ev.pMetricValues = values.data();
        CU(cuptiProfilerHostEvaluateToGpuValues(&ev));
        printf("launch %d %s: all-passes %d dropped %zu ranges %zu name '%s' cost %.2f ms\n", l,
               conflicts ? "bank_conflicts" : "increment", sp.isAllPassSubmitted, dd.numOfRangeDropped,
               gi.numTotalRanges, ri.rangeName, t1 - t0);
        for (size_t i = 0; i < cnames.size(); i++) printf("  %s = %.17g\n", cnames[i], values[i]);
        char path[512]; snprintf(path, sizeof path, "%s/counterdata-%d.bin", outdir, l);
        FILE *f = fopen(path, "wb"); if (f) { fwrite(image.data(), 1, image.size(), f); fclose(f); }
        snprintf(path, sizeof path, "%s/values-%d.txt", outdir, l);
        f = fopen(path, "w"); if (f) { fprintf(f, "%s %s\n", cn.pChipName, conflicts ? "bank_conflicts" : "increment");
            for (size_t i = 0; i < cnames.size(); i++) fprintf(f, "%s %.17g\n", cnames[i], values[i]); fclose(f); }
    }
    // Unprofiled launches after profiling: timing of 100 launches.
    cudaDeviceSynchronize();
    double t0 = now_ms();
    for (int i = 0; i < 100; i++) increment<<<n / 256, 256>>>(x, n);
    cudaDeviceSynchronize();
    printf("100 unprofiled launches while enabled: %.2f ms\n", now_ms() - t0);
    CUpti_RangeProfiler_Disable_Params di = {CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE};
    di.pRangeProfilerObject = en.pRangeProfilerObject; CU(cuptiRangeProfilerDisable(&di));
    t0 = now_ms();
    for (int i = 0; i < 100; i++) increment<<<n / 256, 256>>>(x, n);
    cudaDeviceSynchronize();
    printf("100 unprofiled launches after disable: %.2f ms\n", now_ms() - t0);
    int *hx = (int *)malloc(n * sizeof(int));
    cudaMemcpy(hx, x, n * sizeof(int), cudaMemcpyDeviceToHost);
    // 6 unprofiled + 3 profiled increments (l = 0, 2, 4) + 200.
    printf("x[0] = %d x[n-1] = %d (expected 209)\n", hx[0], hx[n - 1]);
    cuptiActivityFlushAll(1);
    printf("kernel activity records: %d\n", kernels_seen);
    return 0;
}
