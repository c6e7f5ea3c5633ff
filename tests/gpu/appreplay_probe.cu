// appreplay_probe: CUPTI 13's range profiler in application replay across process runs, the
// way librtrace.so's application replay uses it (inject/src/cupti/profiler/range.rs), so that
// its assumptions can be checked on a GPU. Driven by appreplay_probe.sh.
//
//   appreplay_probe PASS STATE_DIR [MODE]
//
// Each run is one replay pass. It makes two user ranges of kernels, "rangeA" (compute: 2
// launches) and "rangeB" (memory: 3 launches), with a kernel between them outside any range.
// The counter data image (sized for 64 ranges, as librtrace.so does) is freshly initialized in
// pass 0 and loaded from STATE_DIR/image in later passes; it is saved back after each range.
// MODE `session` (the default; what librtrace.so does): SetConfig (user range, application
// replay, passIndex = PASS) + Start + PushRange ... PopRange + Stop + DecodeData per range.
// MODE `run`: one SetConfig + Start before the first range, both ranges pushed and popped,
// one Stop + DecodeData after the last. MODE `samename`: as `session`, both ranges named
// "rangeA" (does CUPTI keep two ranges of one name apart? librtrace.so pushes "NAME [i]").
// If SetConfig refuses CUPTI_ApplicationReplay, CUPTI_UserReplay is tried, and said.
// Prints, per Stop: passIndex, targetNestingLevel, isAllPassSubmitted; after each decode the
// ranges the image holds and their names; in pass 0 the passes the configuration costs
// (written to STATE_DIR/passes); when Stop says all passes are submitted (or PASS is the last),
// the evaluated metrics per range, and STATE_DIR/done is written.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CUPTI_CALL(call)                                                                     \
    do {                                                                                     \
        CUptiResult r_ = (call);                                                             \
        if (r_ != CUPTI_SUCCESS) {                                                           \
            const char *s_ = "?";                                                            \
            cuptiGetResultString(r_, &s_);                                                   \
            fprintf(stderr, "%s:%d: %s: %s (%d)\n", __FILE__, __LINE__, #call, s_, (int)r_); \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

#define CUDA_CALL(call)                                                                  \
    do {                                                                                 \
        cudaError_t e_ = (call);                                                         \
        if (e_ != cudaSuccess) {                                                         \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,               \
                    cudaGetErrorString(e_));                                             \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

static const size_t CAPACITY = 64;
static const char *METRICS[] = {
    "gpu__time_duration.sum",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
};
static const size_t NUM_METRICS = sizeof METRICS / sizeof METRICS[0];

#ifdef __CUDACC__
__global__ void compute(float *out, int iters) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float x = (float)i;
    for (int k = 0; k < iters; k++)
        x = x * 1.0000001f + 0.5f;
    out[i] = x;
}

__global__ void copy(const float *in, float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = in[i] * 2.0f;
}

#endif

static std::vector<uint8_t> read_file(const std::string &path) {
    std::vector<uint8_t> v;
    FILE *f = fopen(path.c_str(), "rb");
    if (!f)
        return v;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    v.resize((size_t)n);
    if (n > 0 && fread(v.data(), 1, (size_t)n, f) != (size_t)n)
        v.clear();
    fclose(f);
    return v;
}

static void write_file(const std::string &path, const void *data, size_t n) {
    FILE *f = fopen(path.c_str(), "wb");
    if (!f || fwrite(data, 1, n, f) != n) {
        fprintf(stderr, "cannot write %s\n", path.c_str());
        exit(1);
    }
    fclose(f);
}

struct Probe {
    CUpti_RangeProfiler_Object *object = nullptr;
    std::vector<uint8_t> config, image;
    size_t pass = 0;
    CUpti_ProfilerReplayMode mode = CUPTI_ApplicationReplay;
    bool mode_chosen = false;
    bool all_submitted = false;
    std::string dir;

    void set_config() {
        CUpti_RangeProfiler_SetConfig_Params p = {CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE};
        p.pRangeProfilerObject = object;
        p.configSize = config.size();
        p.pConfig = config.data();
        p.counterDataImageSize = image.size();
        p.pCounterDataImage = image.data();
        p.range = CUPTI_UserRange;
        p.replayMode = mode;
        p.maxRangesPerPass = CAPACITY;
        p.numNestingLevels = 1;
        p.minNestingLevel = 1;
        p.passIndex = pass;
        p.targetNestingLevel = 1;
        CUptiResult r = cuptiRangeProfilerSetConfig(&p);
        if (r != CUPTI_SUCCESS && !mode_chosen) {
            const char *s = "?";
            cuptiGetResultString(r, &s);
            printf("SetConfig(ApplicationReplay, passIndex=%zu) refused: %s (%d); trying UserReplay\n",
                   pass, s, (int)r);
            mode = CUPTI_UserReplay;
            p.replayMode = mode;
            r = cuptiRangeProfilerSetConfig(&p);
        }
        CUPTI_CALL(r);
        if (!mode_chosen)
            printf("SetConfig ok: replay=%s passIndex=%zu\n",
                   mode == CUPTI_ApplicationReplay ? "ApplicationReplay" : "UserReplay", pass);
        mode_chosen = true;
    }

    void start() {
        CUpti_RangeProfiler_Start_Params p = {CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
        p.pRangeProfilerObject = object;
        CUPTI_CALL(cuptiRangeProfilerStart(&p));
    }

    void push(const char *name) {
        CUpti_RangeProfiler_PushRange_Params p = {CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE};
        p.pRangeProfilerObject = object;
        p.pRangeName = name;
        CUPTI_CALL(cuptiRangeProfilerPushRange(&p));
    }

    void pop() {
        CUpti_RangeProfiler_PopRange_Params p = {CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE};
        p.pRangeProfilerObject = object;
        CUPTI_CALL(cuptiRangeProfilerPopRange(&p));
    }

    // Stop, DecodeData, the image saved; prints what CUPTI said.
    void stop_and_decode() {
        CUpti_RangeProfiler_Stop_Params s = {CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
        s.pRangeProfilerObject = object;
        CUPTI_CALL(cuptiRangeProfilerStop(&s));
        printf("Stop: passIndex=%zu targetNestingLevel=%zu isAllPassSubmitted=%u\n", s.passIndex,
               s.targetNestingLevel, (unsigned)s.isAllPassSubmitted);
        all_submitted = all_submitted || s.isAllPassSubmitted;
        CUpti_RangeProfiler_DecodeData_Params d = {CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE};
        d.pRangeProfilerObject = object;
        CUPTI_CALL(cuptiRangeProfilerDecodeData(&d));
        CUpti_RangeProfiler_GetCounterDataInfo_Params info = {
            CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE};
        info.pCounterDataImage = image.data();
        info.counterDataImageSize = image.size();
        CUPTI_CALL(cuptiRangeProfilerGetCounterDataInfo(&info));
        printf("DecodeData: numOfRangeDropped=%zu; the image holds %zu range(s):", d.numOfRangeDropped,
               info.numTotalRanges);
        for (size_t i = 0; i < info.numTotalRanges; i++) {
            CUpti_RangeProfiler_CounterData_GetRangeInfo_Params r = {
                CUpti_RangeProfiler_CounterData_GetRangeInfo_Params_STRUCT_SIZE};
            r.pCounterDataImage = image.data();
            r.counterDataImageSize = image.size();
            r.rangeIndex = i;
            r.rangeDelimiter = "/";
            CUptiResult rc = cuptiRangeProfilerCounterDataGetRangeInfo(&r);
            printf(" [%zu] %s", i, rc == CUPTI_SUCCESS && r.rangeName ? r.rangeName : "?");
        }
        printf("\n");
        write_file(dir + "/image", image.data(), image.size());
    }
};

#ifdef __CUDACC__
static void work(float *a, float *b, int n, const char *which) {
    if (strcmp(which, "A") == 0) {
        compute<<<n / 256, 256>>>(a, 20000);
        compute<<<n / 256, 256>>>(b, 20000);
    } else if (strcmp(which, "B") == 0) {
        for (int k = 0; k < 3; k++)
            copy<<<n / 256, 256>>>(a, b, n);
    } else {
        copy<<<n / 256, 256>>>(b, a, n);
    }
    CUDA_CALL(cudaDeviceSynchronize());
}
#else
// A host compiler's syntax check of the CUPTI calls (g++ -fsyntax-only): no kernels.
static void work(float *, float *, int, const char *) { CUDA_CALL(cudaDeviceSynchronize()); }
#endif

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s PASS STATE_DIR [session|run]\n", argv[0]);
        return 2;
    }
    Probe probe;
    probe.pass = (size_t)atoi(argv[1]);
    probe.dir = argv[2];
    const char *mode = argc > 3 ? argv[3] : "session";
    bool same_name = strcmp(mode, "samename") == 0;
    bool per_range = strcmp(mode, "session") == 0 || same_name;

    const int n = 1 << 22;
    float *a, *b;
    CUDA_CALL(cudaMalloc(&a, n * sizeof(float)));
    CUDA_CALL(cudaMalloc(&b, n * sizeof(float)));
    CUDA_CALL(cudaMemset(a, 0, n * sizeof(float)));
    CUcontext ctx;
    cuCtxGetCurrent(&ctx);

    CUpti_Profiler_Initialize_Params init = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
    CUPTI_CALL(cuptiProfilerInitialize(&init));
    CUpti_Device_GetChipName_Params chip = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};
    chip.deviceIndex = 0;
    CUPTI_CALL(cuptiDeviceGetChipName(&chip));
    CUpti_Profiler_GetCounterAvailability_Params avail = {
        CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE};
    avail.ctx = ctx;
    CUPTI_CALL(cuptiProfilerGetCounterAvailability(&avail));
    std::vector<uint8_t> availability(avail.counterAvailabilityImageSize);
    avail.pCounterAvailabilityImage = availability.data();
    CUPTI_CALL(cuptiProfilerGetCounterAvailability(&avail));

    CUpti_Profiler_Host_Initialize_Params hi = {CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
    hi.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    hi.pChipName = chip.pChipName;
    hi.pCounterAvailabilityImage = availability.data();
    CUPTI_CALL(cuptiProfilerHostInitialize(&hi));
    CUpti_Profiler_Host_ConfigAddMetrics_Params add = {
        CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
    add.pHostObject = hi.pHostObject;
    add.ppMetricNames = METRICS;
    add.numMetrics = NUM_METRICS;
    CUPTI_CALL(cuptiProfilerHostConfigAddMetrics(&add));
    CUpti_Profiler_Host_GetConfigImageSize_Params cs = {
        CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
    cs.pHostObject = hi.pHostObject;
    CUPTI_CALL(cuptiProfilerHostGetConfigImageSize(&cs));
    probe.config.resize(cs.configImageSize);
    CUpti_Profiler_Host_GetConfigImage_Params ci = {
        CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
    ci.pHostObject = hi.pHostObject;
    ci.configImageSize = probe.config.size();
    ci.pConfigImage = probe.config.data();
    CUPTI_CALL(cuptiProfilerHostGetConfigImage(&ci));
    CUpti_Profiler_Host_GetNumOfPasses_Params np = {
        CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE};
    np.configImageSize = probe.config.size();
    np.pConfigImage = probe.config.data();
    CUPTI_CALL(cuptiProfilerHostGetNumOfPasses(&np));
    printf("chip=%s passes=%zu pass=%zu mode=%s\n", chip.pChipName, np.numOfPasses, probe.pass,
           mode);
    if (probe.pass == 0) {
        std::string s = std::to_string(np.numOfPasses) + "\n";
        write_file(probe.dir + "/passes", s.data(), s.size());
    }

    CUpti_RangeProfiler_Enable_Params en = {CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE};
    en.ctx = ctx;
    CUPTI_CALL(cuptiRangeProfilerEnable(&en));
    probe.object = en.pRangeProfilerObject;
    CUpti_RangeProfiler_GetCounterDataSize_Params ds = {
        CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE};
    ds.pRangeProfilerObject = probe.object;
    ds.pMetricNames = METRICS;
    ds.numMetrics = NUM_METRICS;
    ds.maxNumOfRanges = CAPACITY;
    ds.maxNumRangeTreeNodes = (uint32_t)CAPACITY;
    CUPTI_CALL(cuptiRangeProfilerGetCounterDataSize(&ds));
    probe.image.resize(ds.counterDataSize);
    if (probe.pass == 0) {
        CUpti_RangeProfiler_CounterDataImage_Initialize_Params ii = {
            CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE};
        ii.pRangeProfilerObject = probe.object;
        ii.counterDataSize = probe.image.size();
        ii.pCounterData = probe.image.data();
        CUPTI_CALL(cuptiRangeProfilerCounterDataImageInitialize(&ii));
    } else {
        std::vector<uint8_t> saved = read_file(probe.dir + "/image");
        if (saved.size() != probe.image.size()) {
            fprintf(stderr, "%s/image: %zu bytes, expected %zu\n", probe.dir.c_str(), saved.size(),
                    probe.image.size());
            return 1;
        }
        probe.image = saved;
    }

    if (!per_range) {
        probe.set_config();
        probe.start();
    }
    const char *names[] = {"rangeA", same_name ? "rangeA" : "rangeB"};
    const char *which[] = {"A", "B"};
    for (int r = 0; r < 2; r++) {
        if (per_range) {
            probe.set_config();
            probe.start();
        }
        probe.push(names[r]);
        work(a, b, n, which[r]);
        probe.pop();
        if (per_range)
            probe.stop_and_decode();
        if (r == 0)
            work(a, b, n, "outside");
    }
    if (!per_range)
        probe.stop_and_decode();

    if (probe.all_submitted || probe.pass + 1 >= np.numOfPasses) {
        printf("last pass (isAllPassSubmitted=%d, pass %zu of %zu):\n", (int)probe.all_submitted,
               probe.pass, np.numOfPasses);
        for (size_t r = 0; r < 2; r++) {
            double values[NUM_METRICS] = {0};
            CUpti_Profiler_Host_EvaluateToGpuValues_Params ev = {
                CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
            ev.pHostObject = hi.pHostObject;
            ev.pCounterDataImage = probe.image.data();
            ev.counterDataImageSize = probe.image.size();
            ev.rangeIndex = r;
            ev.ppMetricNames = METRICS;
            ev.numMetrics = NUM_METRICS;
            ev.pMetricValues = values;
            CUptiResult rc = cuptiProfilerHostEvaluateToGpuValues(&ev);
            if (rc != CUPTI_SUCCESS) {
                const char *s = "?";
                cuptiGetResultString(rc, &s);
                printf("  range %zu: EvaluateToGpuValues: %s (%d)\n", r, s, (int)rc);
                continue;
            }
            for (size_t m = 0; m < NUM_METRICS; m++)
                printf("  range %zu %s: %s = %.6g\n", r, names[r], METRICS[m], values[m]);
        }
        write_file(probe.dir + "/done", "1\n", 2);
    }

    CUpti_RangeProfiler_Disable_Params dis = {CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE};
    dis.pRangeProfilerObject = probe.object;
    CUPTI_CALL(cuptiRangeProfilerDisable(&dis));
    CUpti_Profiler_Host_Deinitialize_Params hd = {CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
    hd.pHostObject = hi.pHostObject;
    CUPTI_CALL(cuptiProfilerHostDeinitialize(&hd));
    CUpti_Profiler_DeInitialize_Params di = {CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE};
    CUPTI_CALL(cuptiProfilerDeInitialize(&di));
    CUDA_CALL(cudaFree(a));
    CUDA_CALL(cudaFree(b));
    return 0;
}
