/* rangeprof_client: a client of CUPTI 13's kernel-profiling APIs (cupti_profiler_target.h,
 * cupti_target.h, cupti_profiler_host.h, cupti_range_profiler.h), run against the simulated
 * CUPTI and driver. Built as C++ (cupti_profiler_host.h includes <string>).
 *
 * It does what a range-profiling client does: initializes the profiler, reads the chip name and
 * counter availability, builds a configuration on the host, enables the range profiler on the
 * primary context, then runs three auto-range / kernel-replay sessions: one kernel per session
 * twice (one profile per launch), and one session of three launches with maxRangesPerPass 2
 * (the third is dropped). It evaluates every range, then one user-range / user-replay session.
 * It also checks the errors of misuse, and that every launch keeps its one kernel activity
 * record, with the duration the profiler reported. Prints one line per result; exits 1 on anything
 * unexpected. With SIMCUPTI_PROFILER=privileges|busy|unsupported|mps it prints what fails and
 * checks that kernels still run. */
#include "common.h"

#include <cupti.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>
#include <string.h>

#define CUPTI_EXPECT(call, want)                                                         \
    do {                                                                                 \
        CUptiResult r_ = (call);                                                         \
        if (r_ != (CUptiResult)(want)) {                                                 \
            fprintf(stderr, "%s:%d: %s returned %d, expected %d\n", __FILE__, __LINE__, \
                    #call, (int)r_, (int)(want));                                        \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)
#define CUPTI_CHECK(call) CUPTI_EXPECT(call, CUPTI_SUCCESS)

static const char PROF_IMAGE[] =
    "simcuda-module\n"
    "kernel gemm_tile 2500\n"
    "kernel reduce_rows 1500\n"
    "kernel empty 1000\n";

#define NMETRICS 5
static const char *METRICS[NMETRICS] = {
    "gpu__time_duration.sum",
    "gpc__cycles_elapsed.max",
    "sm__cycles_active.avg",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "smsp__inst_executed.sum",
};

/* Kernel activity records: name and end - start, in delivery order. */
#define MAX_KERNELS 32
static char kernel_names[MAX_KERNELS][32];
static unsigned long long kernel_ns[MAX_KERNELS];
static int nkernels;

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *buffer = (uint8_t *)aligned_alloc(8, 1 << 16);
    *size = 1 << 16;
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid) {
    (void)ctx, (void)stream, (void)size;
    CUpti_Activity *r = NULL;
    while (cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) {
        if (r->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
            continue;
        CUpti_ActivityKernel10 *k = (CUpti_ActivityKernel10 *)r;
        REQUIRE(nkernels < MAX_KERNELS, "too many kernels");
        snprintf(kernel_names[nkernels], sizeof kernel_names[0], "%s", k->name);
        kernel_ns[nkernels++] = k->end - k->start;
    }
    free(buffer);
}

static void print_kernels(void) {
    CUPTI_CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    printf("kernel records=%d:", nkernels);
    for (int i = 0; i < nkernels; i++)
        printf(" %s=%llu", kernel_names[i], kernel_ns[i]);
    printf("\n");
}

static CUpti_RangeProfiler_Object *prof;
static void *host_obj;
static uint8_t config[4096];
static size_t config_size;

static uint8_t *new_image(size_t max_ranges, size_t *size) {
    CUpti_RangeProfiler_GetCounterDataSize_Params s = {
        CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE};
    s.pRangeProfilerObject = prof;
    s.pMetricNames = METRICS;
    s.numMetrics = NMETRICS;
    s.maxNumOfRanges = max_ranges;
    s.maxNumRangeTreeNodes = max_ranges;
    CUPTI_CHECK(cuptiRangeProfilerGetCounterDataSize(&s));
    uint8_t *img = (uint8_t *)malloc(s.counterDataSize);
    CUpti_RangeProfiler_CounterDataImage_Initialize_Params i = {
        CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE};
    i.pRangeProfilerObject = prof;
    i.counterDataSize = s.counterDataSize;
    i.pCounterData = img;
    CUPTI_CHECK(cuptiRangeProfilerCounterDataImageInitialize(&i));
    *size = s.counterDataSize;
    return img;
}

static CUptiResult set_config(uint8_t *img, size_t size, CUpti_ProfilerRange range,
                              CUpti_ProfilerReplayMode replay, size_t max_per_pass) {
    CUpti_RangeProfiler_SetConfig_Params c = {CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE};
    c.pRangeProfilerObject = prof;
    c.configSize = config_size;
    c.pConfig = config;
    c.counterDataImageSize = size;
    c.pCounterDataImage = img;
    c.range = range;
    c.replayMode = replay;
    c.maxRangesPerPass = max_per_pass;
    c.numNestingLevels = 1;
    c.minNestingLevel = 1;
    c.passIndex = 0;
    c.targetNestingLevel = 1;
    return cuptiRangeProfilerSetConfig(&c);
}

static void start(void) {
    CUpti_RangeProfiler_Start_Params s = {CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
    s.pRangeProfilerObject = prof;
    CUPTI_CHECK(cuptiRangeProfilerStart(&s));
}

static int stop(size_t *pass) {
    CUpti_RangeProfiler_Stop_Params s = {CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
    s.pRangeProfilerObject = prof;
    CUPTI_CHECK(cuptiRangeProfilerStop(&s));
    *pass = s.passIndex;
    return s.isAllPassSubmitted;
}

/* Decodes, then prints every range of the image and its values. */
static void report(const char *what, uint8_t *img, size_t size) {
    CUpti_RangeProfiler_DecodeData_Params d = {CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE};
    d.pRangeProfilerObject = prof;
    CUPTI_CHECK(cuptiRangeProfilerDecodeData(&d));
    CUpti_RangeProfiler_GetCounterDataInfo_Params info = {
        CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE};
    info.pCounterDataImage = img;
    info.counterDataImageSize = size;
    CUPTI_CHECK(cuptiRangeProfilerGetCounterDataInfo(&info));
    printf("%s: ranges=%zu dropped=%zu\n", what, info.numTotalRanges, d.numOfRangeDropped);
    for (size_t r = 0; r < info.numTotalRanges; r++) {
        CUpti_RangeProfiler_CounterData_GetRangeInfo_Params ri = {
            CUpti_RangeProfiler_CounterData_GetRangeInfo_Params_STRUCT_SIZE};
        ri.pCounterDataImage = img;
        ri.counterDataImageSize = size;
        ri.rangeIndex = r;
        ri.rangeDelimiter = "/";
        CUPTI_CHECK(cuptiRangeProfilerCounterDataGetRangeInfo(&ri));
        double v[NMETRICS];
        CUpti_Profiler_Host_EvaluateToGpuValues_Params e = {
            CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
        e.pHostObject = (CUpti_Profiler_Host_Object *)host_obj;
        e.pCounterDataImage = img;
        e.counterDataImageSize = size;
        e.rangeIndex = r;
        e.ppMetricNames = METRICS;
        e.numMetrics = NMETRICS;
        e.pMetricValues = v;
        CUPTI_CHECK(cuptiProfilerHostEvaluateToGpuValues(&e));
        printf("  range %s:", ri.rangeName);
        for (int m = 0; m < NMETRICS; m++)
            printf(" %.2f", v[m]);
        printf("\n");
        free((void *)ri.rangeName);
    }
}

int main(void) {
    const char *knob = getenv("SIMCUPTI_PROFILER");
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction gemm, reduce, empty;
    CUPTI_CHECK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
    CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuModuleLoadData(&mod, PROF_IMAGE));
    CHECK(cuModuleGetFunction(&gemm, mod, "gemm_tile"));
    CHECK(cuModuleGetFunction(&reduce, mod, "reduce_rows"));
    CHECK(cuModuleGetFunction(&empty, mod, "empty"));

    /* Target: initialize, device support, chip, counter availability. */
    CUpti_Profiler_Initialize_Params init = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
    CUPTI_CHECK(cuptiProfilerInitialize(&init));
    CUpti_Profiler_DeviceSupported_Params sup = {CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE};
    sup.cuDevice = dev;
    sup.api = CUPTI_PROFILER_RANGE_PROFILING;
    CUPTI_CHECK(cuptiProfilerDeviceSupported(&sup));
    printf("supported=%d architecture=%d\n", (int)sup.isSupported, (int)sup.architecture);
    CUpti_Device_GetChipName_Params chip = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};
    chip.deviceIndex = 0;
    CUPTI_CHECK(cuptiDeviceGetChipName(&chip));
    CUpti_Device_GetChipName_Params bad_chip = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};
    bad_chip.deviceIndex = 99;
    CUPTI_EXPECT(cuptiDeviceGetChipName(&bad_chip), CUPTI_ERROR_INVALID_DEVICE);
    CUpti_Profiler_GetCounterAvailability_Params av = {
        CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE};
    av.ctx = ctx;
    CUptiResult rc = cuptiProfilerGetCounterAvailability(&av);
    uint8_t avail[256];
    if (rc == CUPTI_SUCCESS) {
        REQUIRE(av.counterAvailabilityImageSize <= sizeof avail, "%zu",
                av.counterAvailabilityImageSize);
        av.pCounterAvailabilityImage = avail;
        CUPTI_CHECK(cuptiProfilerGetCounterAvailability(&av));
        printf("chip=%s availability=%zu bytes\n", chip.pChipName,
               av.counterAvailabilityImageSize);
    } else {
        printf("chip=%s availability error %d\n", chip.pChipName, (int)rc);
    }

    /* Host: chips, configuration, passes. */
    CUpti_Profiler_Host_Initialize_Params hi = {CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
    hi.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    hi.pChipName = "XY999";
    CUPTI_EXPECT(cuptiProfilerHostInitialize(&hi), CUPTI_ERROR_INVALID_CHIP_NAME);
    hi.pChipName = chip.pChipName;
    hi.pCounterAvailabilityImage = rc == CUPTI_SUCCESS ? avail : NULL;
    CUPTI_CHECK(cuptiProfilerHostInitialize(&hi));
    host_obj = hi.pHostObject;
    CUpti_Profiler_Host_ConfigAddMetrics_Params add = {
        CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
    add.pHostObject = hi.pHostObject;
    add.ppMetricNames = METRICS;
    add.numMetrics = NMETRICS;
    CUPTI_CHECK(cuptiProfilerHostConfigAddMetrics(&add));
    CUpti_Profiler_Host_GetConfigImageSize_Params cs = {
        CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
    cs.pHostObject = hi.pHostObject;
    CUPTI_CHECK(cuptiProfilerHostGetConfigImageSize(&cs));
    REQUIRE(cs.configImageSize <= sizeof config, "%zu", cs.configImageSize);
    CUpti_Profiler_Host_GetConfigImage_Params ci = {
        CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
    ci.pHostObject = hi.pHostObject;
    ci.configImageSize = cs.configImageSize;
    ci.pConfigImage = config;
    CUPTI_CHECK(cuptiProfilerHostGetConfigImage(&ci));
    config_size = cs.configImageSize;
    CUpti_Profiler_Host_GetNumOfPasses_Params np = {
        CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE};
    np.configImageSize = config_size;
    np.pConfigImage = config;
    CUPTI_CHECK(cuptiProfilerHostGetNumOfPasses(&np));
    printf("config=%zu bytes passes=%zu\n", config_size, np.numOfPasses);

    /* A failed add spoils a host object (as CUPTI 13.0). */
    CUpti_Profiler_Host_Initialize_Params h2 = {CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
    h2.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    h2.pChipName = "GA100";
    CUPTI_CHECK(cuptiProfilerHostInitialize(&h2));
    const char *bogus[] = {"bogus_metric"};
    add.pHostObject = h2.pHostObject;
    add.ppMetricNames = bogus;
    add.numMetrics = 1;
    CUPTI_EXPECT(cuptiProfilerHostConfigAddMetrics(&add), CUPTI_ERROR_INVALID_PARAMETER);
    add.ppMetricNames = METRICS;
    CUPTI_EXPECT(cuptiProfilerHostConfigAddMetrics(&add), CUPTI_ERROR_UNKNOWN);
    CUpti_Profiler_Host_Deinitialize_Params hd = {
        CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
    hd.pHostObject = h2.pHostObject;
    CUPTI_CHECK(cuptiProfilerHostDeinitialize(&hd));

    /* Range profiler on the primary context. */
    CUpti_RangeProfiler_Enable_Params en = {CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE};
    en.ctx = ctx;
    rc = cuptiRangeProfilerEnable(&en);
    if (rc != CUPTI_SUCCESS) {
        printf("enable error %d\n", (int)rc);
        CHECK(cuLaunchKernel(gemm, 8, 1, 1, 128, 1, 1, 0, NULL, NULL, NULL));
        CHECK(cuCtxSynchronize());
        print_kernels();
        printf("rangeprof_client ok knob=%s calls=%ld\n", knob ? knob : "", calls);
        return 0;
    }
    prof = en.pRangeProfilerObject;
    CUPTI_EXPECT(cuptiRangeProfilerEnable(&en), CUPTI_ERROR_INVALID_OPERATION);

    size_t size, pass;
    uint8_t *img = new_image(4, &size);
    CUPTI_EXPECT(set_config(img, size, CUPTI_UserRange, CUPTI_KernelReplay, 4),
                 CUPTI_ERROR_INVALID_PARAMETER);
    CUPTI_EXPECT(set_config(img, size, CUPTI_AutoRange, CUPTI_ApplicationReplay, 4),
                 CUPTI_ERROR_INVALID_PARAMETER);
    free(img);

    /* One profile per launch. */
    CUfunction one[2] = {gemm, reduce};
    for (int k = 0; k < 2; k++) {
        img = new_image(4, &size);
        CUPTI_CHECK(set_config(img, size, CUPTI_AutoRange, CUPTI_KernelReplay, 4));
        start();
        CHECK(cuLaunchKernel(one[k], 8, 1, 1, 128, 1, 1, 0, NULL, NULL, NULL));
        int all = stop(&pass);
        printf("profile %d: all_passes=%d\n", k, all);
        report(k == 0 ? "gemm_tile" : "reduce_rows", img, size);
        free(img);
    }

    /* One session of three launches; two ranges per pass: the third is dropped. */
    img = new_image(4, &size);
    CUPTI_CHECK(set_config(img, size, CUPTI_AutoRange, CUPTI_KernelReplay, 2));
    start();
    CHECK(cuLaunchKernel(reduce, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    CHECK(cuLaunchKernel(gemm, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    CHECK(cuLaunchKernel(empty, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    stop(&pass);
    report("session", img, size);
    free(img);

    /* A launch outside Start/Stop is not profiled. */
    CHECK(cuLaunchKernel(empty, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));

    /* User range, user replay: one pass per Start/Stop until all are submitted. */
    img = new_image(4, &size);
    CUPTI_CHECK(set_config(img, size, CUPTI_UserRange, CUPTI_UserReplay, 4));
    int all = 0, passes = 0;
    while (!all) {
        start();
        CUpti_RangeProfiler_PushRange_Params push = {
            CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE};
        push.pRangeProfilerObject = prof;
        push.pRangeName = "step";
        CUPTI_CHECK(cuptiRangeProfilerPushRange(&push));
        CHECK(cuLaunchKernel(gemm, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
        CHECK(cuLaunchKernel(reduce, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
        CUpti_RangeProfiler_PopRange_Params pop = {CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE};
        pop.pRangeProfilerObject = prof;
        CUPTI_CHECK(cuptiRangeProfilerPopRange(&pop));
        all = stop(&pass);
        passes++;
    }
    printf("user replay: passes=%d last_pass=%zu\n", passes, pass);
    report("user", img, size);

    /* Evaluating a metric that is not in the configuration. */
    const char *other[] = {"dram__bytes.sum"};
    double v;
    CUpti_Profiler_Host_EvaluateToGpuValues_Params e = {
        CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
    e.pHostObject = (CUpti_Profiler_Host_Object *)host_obj;
    e.pCounterDataImage = img;
    e.counterDataImageSize = size;
    e.ppMetricNames = other;
    e.numMetrics = 1;
    e.pMetricValues = &v;
    CUPTI_EXPECT(cuptiProfilerHostEvaluateToGpuValues(&e), CUPTI_ERROR_INVALID_PARAMETER);
    free(img);

    CUpti_RangeProfiler_Disable_Params dis = {CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE};
    dis.pRangeProfilerObject = prof;
    CUPTI_CHECK(cuptiRangeProfilerDisable(&dis));
    CUpti_RangeProfiler_Start_Params st = {CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
    st.pRangeProfilerObject = prof;
    CUPTI_EXPECT(cuptiRangeProfilerStart(&st), CUPTI_ERROR_INVALID_OPERATION);
    hd.pHostObject = (CUpti_Profiler_Host_Object *)host_obj;
    CUPTI_CHECK(cuptiProfilerHostDeinitialize(&hd));
    CUpti_Profiler_DeInitialize_Params deinit = {CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE};
    CUPTI_CHECK(cuptiProfilerDeInitialize(&deinit));
    CHECK(cuCtxSynchronize());
    print_kernels();
    printf("rangeprof_client ok knob=%s calls=%ld\n", knob ? knob : "", calls);
    return 0;
}
