// userreplay_probe: does CUPTI 13.0's range profiler in USER replay, with the CUPTI Checkpoint
// API restoring device memory between passes and an L2 flush of our own before each pass, give
// DRAM/L2 values that agree with Nsight Compute's default (`--cache-control all`), where kernel
// replay (what librtrace.so does) does not? And what does each pass cost? Driven by
// tests/gpu/userreplay_probe.sh, which also runs ncu on MODE `none` and compares.
//
//   userreplay_probe MODE [REPEATS]
//
// MODE
//   user-flush    per profiled launch: SetConfig (auto range, CUPTI_UserReplay, one range per
//                 pass), cuptiCheckpointSave; then per pass: cuptiCheckpointRestore (from the
//                 second pass), the L2 flush below, Start, the launch, Stop, until Stop says
//                 isAllPassSubmitted; then DecodeData, EvaluateToGpuValues, cuptiCheckpointFree.
//   user-noflush  the same without the flush.
//   kernel        CUPTI_KernelReplay, auto range, one Start/launch/Stop (librtrace.so's way:
//                 CUPTI saves and restores memory around its own passes, no cache control).
//   none          no profiling: each launch once (for `ncu` to profile the same launches).
// REPEATS (default 1): how many times the kernel sequence runs; every launch is profiled.
//
// Kernels (as tests/gpu/profile_kernels.cu): increment (in place, 16 MiB of int), coalesced_load
// (16 MiB in, 16 MiB out), coalesced_sum (64 MiB read, block sums out), strided_load (stride 32
// floats over 512 MiB), compute_bound (FMA chain).
// The flush: l2_flush reads a buffer of FLUSH_FACTOR x the L2 size (cudaDevAttrL2CacheSize;
// FLUSH_FACTOR 2 unless PROBE_FLUSH_FACTOR says) with ld.global.cg and sums into one 8-byte
// word: it leaves clean lines of its own in L2 and forces the dirty lines left there (by the
// previous pass, by the checkpoint restore) back to DRAM before the profiled pass starts.
//
// Environment: PROBE_METRICS (comma-separated list; default below), PROBE_RANGE=user (user
// replay with a user range pushed around the launch instead of auto range), PROBE_DECODE=pass
// (DecodeData after every pass instead of once after the last), PROBE_CKPT_TRANSFER=1
// (CUPTI_CHECKPOINT_OPT_TRANSFER: restore only blocks that changed).
//
// Output (one fact a line, fields separated by single spaces, values never contain spaces):
//   INFO key=value ...
//   WARN ... / ERROR ...                     (what CUPTI refused; ERROR ends the run)
//   METRIC MODE KERNEL REP NAME VALUE
//   PASSES MODE KERNEL REP DONE CONFIG       (passes run by us / GetNumOfPasses of the config)
//   COST MODE KERNEL REP total_ms=.. per_pass_ms=.. passes=.. setconfig_ms=.. save_ms=..
//        restore_ms=.. flush_ms=.. run_ms=.. decode_ms=.. eval_ms=.. free_ms=..
//        (restore, flush, run: summed over passes; run = Start + launch + sync + Stop)
//   CHECK MODE increment PASS|FAIL sum=.. expected=..
// Exit status 0 unless a CUDA or CUPTI call failed (1) or the increment check failed (3).
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <cupti_checkpoint.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace NV::Cupti::Checkpoint;

#define CUPTI_CALL(call)                                                                     \
    do {                                                                                     \
        CUptiResult r_ = (call);                                                             \
        if (r_ != CUPTI_SUCCESS) {                                                           \
            const char *s_ = "?";                                                            \
            cuptiGetResultString(r_, &s_);                                                   \
            printf("ERROR %s:%d: %s: %s (%d)\n", __FILE__, __LINE__, #call, s_, (int)r_);    \
            fflush(stdout);                                                                  \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

#define CUDA_CALL(call)                                                                  \
    do {                                                                                 \
        cudaError_t e_ = (call);                                                         \
        if (e_ != cudaSuccess) {                                                         \
            printf("ERROR %s:%d: %s: %s\n", __FILE__, __LINE__, #call,                   \
                   cudaGetErrorString(e_));                                              \
            fflush(stdout);                                                              \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

static const char *DEFAULT_METRICS =
    "dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,"
    "lts__t_sectors_srcunit_tex_op_read.sum,gpu__time_duration.sum,"
    "sm__throughput.avg.pct_of_peak_sustained_elapsed,"
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed";

// The launches of one sequence, in order.
enum Kernel { INCREMENT, COALESCED_LOAD, COALESCED_SUM, STRIDED_LOAD, COMPUTE_BOUND, NUM_KERNELS };
static const char *KERNEL_NAMES[NUM_KERNELS] = {"increment", "coalesced_load", "coalesced_sum",
                                                "strided_load", "compute_bound"};

static const int N = 1 << 22;            // 16 MiB of int / float
static const size_t BIG = size_t(N) * 32; // floats in `in`: 512 MiB
static const size_t SUM_N = size_t(1) << 24; // floats read by coalesced_sum: 64 MiB

struct Buffers {
    int *x = nullptr;
    float *in = nullptr, *out = nullptr, *sums = nullptr;
    int4 *flush = nullptr;
    size_t flush_n = 0; // int4 elements
    unsigned long long *sink = nullptr;
    int flush_blocks = 0;
};

#ifdef __CUDACC__
__global__ void increment(int *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1;
}

__global__ void coalesced_load(const float *in, float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i];
}

// 4 floats a thread, a block's sum to sums[blockIdx.x].
__global__ void coalesced_sum(const float4 *in, size_t n4, float *sums) {
    __shared__ float warp_sums[32];
    size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    float acc = 0;
    if (i < n4) { float4 v = in[i]; acc = v.x + v.y + v.z + v.w; }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
    if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x < 32) {
        acc = threadIdx.x < (blockDim.x >> 5) ? warp_sums[threadIdx.x] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
        if (threadIdx.x == 0) sums[blockIdx.x] = acc;
    }
}

__global__ void strided_load(const float *in, float *out, int n, int stride) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[(size_t(i) * stride) % (size_t(n) * 32)];
}

__global__ void compute_bound(float *out, int iters) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float a = i * 1e-6f, b = 1.0001f, c = 0.9999f;
    for (int k = 0; k < iters; k++) { a = fmaf(a, b, c); b = fmaf(b, c, a * 1e-9f); }
    out[i] = a + b;
}

// Reads the whole buffer through L2 (ld.global.cg: not kept in L1), one 8-byte atomic a warp.
__global__ void l2_flush(const int4 *buf, size_t n, unsigned long long *sink) {
    unsigned long long acc = 0;
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += size_t(gridDim.x) * blockDim.x) {
        int4 v = __ldcg(buf + i);
        acc += (unsigned)(v.x ^ v.y ^ v.z ^ v.w);
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(sink, acc);
}

static void launch(Kernel k, const Buffers &b) {
    switch (k) {
    case INCREMENT: increment<<<N / 256, 256>>>(b.x, N); break;
    case COALESCED_LOAD: coalesced_load<<<N / 256, 256>>>(b.in, b.out, N); break;
    case COALESCED_SUM:
        coalesced_sum<<<unsigned(SUM_N / 4 / 256), 256>>>((const float4 *)b.in, SUM_N / 4, b.sums);
        break;
    case STRIDED_LOAD: strided_load<<<N / 256, 256>>>(b.in, b.out, N, 32); break;
    case COMPUTE_BOUND: compute_bound<<<1056, 256>>>(b.out, 20000); break;
    default: break;
    }
}

static void flush_l2(const Buffers &b) {
    l2_flush<<<b.flush_blocks, 256>>>(b.flush, b.flush_n, b.sink);
}

// Loads every kernel's module now (lazy loading would otherwise do it inside the first pass).
static void load_kernels() {
    cudaFuncAttributes a;
    CUDA_CALL(cudaFuncGetAttributes(&a, increment));
    CUDA_CALL(cudaFuncGetAttributes(&a, coalesced_load));
    CUDA_CALL(cudaFuncGetAttributes(&a, coalesced_sum));
    CUDA_CALL(cudaFuncGetAttributes(&a, strided_load));
    CUDA_CALL(cudaFuncGetAttributes(&a, compute_bound));
    CUDA_CALL(cudaFuncGetAttributes(&a, l2_flush));
}
#else
// g++ -fsyntax-only of the host code: the kernels and their launches exist only under nvcc.
static void launch(Kernel k, const Buffers &b);
static void flush_l2(const Buffers &b);
static void load_kernels();
#endif

static double now_ms() {
    return std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

static std::vector<std::string> split(const char *list) {
    std::vector<std::string> v;
    std::string s(list);
    size_t p = 0;
    while (p <= s.size()) {
        size_t q = s.find(',', p);
        if (q == std::string::npos) q = s.size();
        if (q > p) v.push_back(s.substr(p, q - p));
        p = q + 1;
    }
    return v;
}

struct Profiler {
    CUcontext ctx = nullptr;
    CUpti_Profiler_Host_Object *host = nullptr;
    CUpti_RangeProfiler_Object *object = nullptr;
    std::vector<uint8_t> config, image;
    std::vector<const char *> metrics;
    size_t config_passes = 0;
    std::string chip;

    void setup(CUcontext c, const std::vector<std::string> &names) {
        ctx = c;
        for (auto &n : names) metrics.push_back(n.c_str());
        CUpti_Profiler_Initialize_Params init = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
        init.pPriv = nullptr;
        CUPTI_CALL(cuptiProfilerInitialize(&init));
        int dev = 0;
        CUDA_CALL(cudaGetDevice(&dev));
        CUpti_Device_GetChipName_Params cn = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};
        cn.pPriv = nullptr;
        cn.deviceIndex = (size_t)dev;
        CUPTI_CALL(cuptiDeviceGetChipName(&cn));
        chip = cn.pChipName;
        CUpti_Profiler_GetCounterAvailability_Params ca = {
            CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE};
        ca.pPriv = nullptr;
        ca.ctx = ctx;
        CUPTI_CALL(cuptiProfilerGetCounterAvailability(&ca));
        std::vector<uint8_t> avail(ca.counterAvailabilityImageSize);
        ca.pCounterAvailabilityImage = avail.data();
        CUPTI_CALL(cuptiProfilerGetCounterAvailability(&ca));

        CUpti_Profiler_Host_Initialize_Params hi = {CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
        hi.pPriv = nullptr;
        hi.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
        hi.pChipName = chip.c_str();
        hi.pCounterAvailabilityImage = avail.data();
        CUPTI_CALL(cuptiProfilerHostInitialize(&hi));
        host = hi.pHostObject;
        CUpti_Profiler_Host_ConfigAddMetrics_Params am = {
            CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
        am.pPriv = nullptr;
        am.pHostObject = host;
        am.ppMetricNames = metrics.data();
        am.numMetrics = metrics.size();
        CUPTI_CALL(cuptiProfilerHostConfigAddMetrics(&am));
        CUpti_Profiler_Host_GetConfigImageSize_Params cs = {
            CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
        cs.pPriv = nullptr;
        cs.pHostObject = host;
        CUPTI_CALL(cuptiProfilerHostGetConfigImageSize(&cs));
        config.resize(cs.configImageSize);
        CUpti_Profiler_Host_GetConfigImage_Params gc = {
            CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
        gc.pPriv = nullptr;
        gc.pHostObject = host;
        gc.configImageSize = config.size();
        gc.pConfigImage = config.data();
        CUPTI_CALL(cuptiProfilerHostGetConfigImage(&gc));
        CUpti_Profiler_Host_GetNumOfPasses_Params np = {
            CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE};
        np.pPriv = nullptr;
        np.configImageSize = config.size();
        np.pConfigImage = config.data();
        CUPTI_CALL(cuptiProfilerHostGetNumOfPasses(&np));
        config_passes = np.numOfPasses;

        CUpti_RangeProfiler_Enable_Params en = {CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE};
        en.pPriv = nullptr;
        en.ctx = ctx;
        CUPTI_CALL(cuptiRangeProfilerEnable(&en));
        object = en.pRangeProfilerObject;
        CUpti_RangeProfiler_GetCounterDataSize_Params gs = {
            CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE};
        gs.pPriv = nullptr;
        gs.pRangeProfilerObject = object;
        gs.pMetricNames = metrics.data();
        gs.numMetrics = metrics.size();
        gs.maxNumOfRanges = 1;
        gs.maxNumRangeTreeNodes = 1;
        CUPTI_CALL(cuptiRangeProfilerGetCounterDataSize(&gs));
        image.resize(gs.counterDataSize);
    }

    // A fresh image and a new session's configuration: once per profiled launch. Returns
    // SetConfig's result (the caller decides what a refusal means).
    CUptiResult configure(CUpti_ProfilerReplayMode replay, CUpti_ProfilerRange range) {
        CUpti_RangeProfiler_CounterDataImage_Initialize_Params ii = {
            CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE};
        ii.pPriv = nullptr;
        ii.pRangeProfilerObject = object;
        ii.counterDataSize = image.size();
        ii.pCounterData = image.data();
        CUPTI_CALL(cuptiRangeProfilerCounterDataImageInitialize(&ii));
        CUpti_RangeProfiler_SetConfig_Params sc = {CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE};
        sc.pPriv = nullptr;
        sc.pRangeProfilerObject = object;
        sc.configSize = config.size();
        sc.pConfig = config.data();
        sc.counterDataImageSize = image.size();
        sc.pCounterDataImage = image.data();
        sc.range = range;
        sc.replayMode = replay;
        sc.maxRangesPerPass = 1;
        sc.numNestingLevels = 1;
        sc.minNestingLevel = 1;
        sc.passIndex = 0;
        sc.targetNestingLevel = 1;
        return cuptiRangeProfilerSetConfig(&sc);
    }

    void start() {
        CUpti_RangeProfiler_Start_Params p = {CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
        p.pPriv = nullptr;
        p.pRangeProfilerObject = object;
        CUPTI_CALL(cuptiRangeProfilerStart(&p));
    }

    // Returns isAllPassSubmitted; *pass_index: the pass Stop reports.
    bool stop(size_t *pass_index) {
        CUpti_RangeProfiler_Stop_Params p = {CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
        p.pPriv = nullptr;
        p.pRangeProfilerObject = object;
        CUPTI_CALL(cuptiRangeProfilerStop(&p));
        *pass_index = p.passIndex;
        return p.isAllPassSubmitted != 0;
    }

    void push(const char *name) {
        CUpti_RangeProfiler_PushRange_Params p = {CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE};
        p.pPriv = nullptr;
        p.pRangeProfilerObject = object;
        p.pRangeName = name;
        CUPTI_CALL(cuptiRangeProfilerPushRange(&p));
    }

    void pop() {
        CUpti_RangeProfiler_PopRange_Params p = {CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE};
        p.pPriv = nullptr;
        p.pRangeProfilerObject = object;
        CUPTI_CALL(cuptiRangeProfilerPopRange(&p));
    }

    size_t decode() {
        CUpti_RangeProfiler_DecodeData_Params d = {CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE};
        d.pPriv = nullptr;
        d.pRangeProfilerObject = object;
        CUPTI_CALL(cuptiRangeProfilerDecodeData(&d));
        return d.numOfRangeDropped;
    }

    size_t ranges() {
        CUpti_RangeProfiler_GetCounterDataInfo_Params gi = {
            CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE};
        gi.pPriv = nullptr;
        gi.pCounterDataImage = image.data();
        gi.counterDataImageSize = image.size();
        CUPTI_CALL(cuptiRangeProfilerGetCounterDataInfo(&gi));
        return gi.numTotalRanges;
    }

    bool evaluate(std::vector<double> &values) {
        values.assign(metrics.size(), NAN);
        CUpti_Profiler_Host_EvaluateToGpuValues_Params ev = {
            CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
        ev.pPriv = nullptr;
        ev.pHostObject = host;
        ev.pCounterDataImage = image.data();
        ev.counterDataImageSize = image.size();
        ev.rangeIndex = 0;
        ev.ppMetricNames = metrics.data();
        ev.numMetrics = metrics.size();
        ev.pMetricValues = values.data();
        CUptiResult r = cuptiProfilerHostEvaluateToGpuValues(&ev);
        if (r != CUPTI_SUCCESS) {
            const char *s = "?";
            cuptiGetResultString(r, &s);
            printf("WARN EvaluateToGpuValues: %s (%d)\n", s, (int)r);
            return false;
        }
        return true;
    }

    void teardown() {
        CUpti_RangeProfiler_Disable_Params di = {CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE};
        di.pPriv = nullptr;
        di.pRangeProfilerObject = object;
        CUPTI_CALL(cuptiRangeProfilerDisable(&di));
        CUpti_Profiler_Host_Deinitialize_Params hd = {
            CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
        hd.pPriv = nullptr;
        hd.pHostObject = host;
        CUPTI_CALL(cuptiProfilerHostDeinitialize(&hd));
        CUpti_Profiler_DeInitialize_Params de = {CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE};
        de.pPriv = nullptr;
        CUPTI_CALL(cuptiProfilerDeInitialize(&de));
    }
};

struct Cost {
    double setconfig = 0, save = 0, restore = 0, flush = 0, run = 0, decode = 0, eval = 0, free_ = 0;
};

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s user-flush|user-noflush|kernel|none [REPEATS]\n", argv[0]);
        return 2;
    }
    const std::string mode = argv[1];
    const int repeats = argc > 2 ? atoi(argv[2]) : 1;
    const bool user = mode == "user-flush" || mode == "user-noflush";
    const bool flush = mode == "user-flush";
    const bool kernel_replay = mode == "kernel";
    if (!user && !kernel_replay && mode != "none") {
        fprintf(stderr, "unknown mode %s\n", mode.c_str());
        return 2;
    }
    const char *env_metrics = getenv("PROBE_METRICS");
    const std::vector<std::string> names = split(env_metrics && *env_metrics ? env_metrics : DEFAULT_METRICS);
    bool user_range = getenv("PROBE_RANGE") && strcmp(getenv("PROBE_RANGE"), "user") == 0;
    const bool decode_each_pass = getenv("PROBE_DECODE") && strcmp(getenv("PROBE_DECODE"), "pass") == 0;
    const bool ckpt_transfer = getenv("PROBE_CKPT_TRANSFER") && atoi(getenv("PROBE_CKPT_TRANSFER")) != 0;
    const int flush_factor = getenv("PROBE_FLUSH_FACTOR") ? atoi(getenv("PROBE_FLUSH_FACTOR")) : 2;

    CUDA_CALL(cudaFree(0));
    CUcontext ctx = nullptr;
    if (cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx) {
        printf("ERROR no current context\n");
        return 1;
    }
    int dev = 0, l2 = 0, sms = 0;
    CUDA_CALL(cudaGetDevice(&dev));
    CUDA_CALL(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    CUDA_CALL(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    cudaDeviceProp prop;
    CUDA_CALL(cudaGetDeviceProperties(&prop, dev));

    Buffers b;
    CUDA_CALL(cudaMalloc(&b.x, sizeof(int) * N));
    CUDA_CALL(cudaMalloc(&b.in, sizeof(float) * BIG));
    CUDA_CALL(cudaMalloc(&b.out, sizeof(float) * N));
    CUDA_CALL(cudaMalloc(&b.sums, sizeof(float) * (SUM_N / 4 / 256)));
    CUDA_CALL(cudaMemset(b.x, 0, sizeof(int) * N));
    CUDA_CALL(cudaMemset(b.in, 0, sizeof(float) * BIG));
    CUDA_CALL(cudaMemset(b.out, 0, sizeof(float) * N));
    // The flush buffer exists in every mode (same device memory for the checkpoint and for
    // CUPTI's own save and restore), used in user-flush only.
    size_t flush_bytes = 0;
    {
        flush_bytes = size_t(l2) * (size_t)(flush_factor > 0 ? flush_factor : 2);
        flush_bytes = (flush_bytes + 15) / 16 * 16;
        b.flush_n = flush_bytes / 16;
        b.flush_blocks = sms * 4;
        CUDA_CALL(cudaMalloc(&b.flush, flush_bytes));
        CUDA_CALL(cudaMemset(b.flush, 1, flush_bytes));
        CUDA_CALL(cudaMalloc(&b.sink, sizeof(unsigned long long)));
        CUDA_CALL(cudaMemset(b.sink, 0, sizeof(unsigned long long)));
    }
    load_kernels();
    CUDA_CALL(cudaDeviceSynchronize());

    Profiler prof;
    if (mode != "none") prof.setup(ctx, names);
    printf("INFO mode=%s repeats=%d chip=%s l2_bytes=%d sms=%d flush_bytes=%zu "
           "metrics=%zu config_passes=%zu range=%s decode=%s ckpt_transfer=%d\n",
           mode.c_str(), repeats, mode != "none" ? prof.chip.c_str() : "-", l2, sms,
           flush_bytes, names.size(), prof.config_passes, user_range ? "user" : "auto",
           decode_each_pass ? "pass" : "end", ckpt_transfer ? 1 : 0);
    printf("INFO device_name=");
    for (const char *c = prop.name; *c; c++) putchar(*c == ' ' ? '_' : *c);
    printf("\n");
    fflush(stdout);

    int failures = 0;
    for (int rep = 0; rep < repeats; rep++) {
        for (int k = 0; k < NUM_KERNELS; k++) {
            const Kernel kern = (Kernel)k;
            const char *kname = KERNEL_NAMES[k];
            Cost c;
            double t0 = now_ms();
            size_t passes = 0, dropped = 0;
            bool all = false;
            if (mode == "none") {
                launch(kern, b);
                CUDA_CALL(cudaGetLastError());
                CUDA_CALL(cudaDeviceSynchronize());
                c.run = now_ms() - t0;
            } else if (kernel_replay) {
                double a = now_ms();
                CUPTI_CALL(prof.configure(CUPTI_KernelReplay, CUPTI_AutoRange));
                double bt = now_ms();
                c.setconfig = bt - a;
                prof.start();
                launch(kern, b);
                CUDA_CALL(cudaGetLastError());
                CUDA_CALL(cudaDeviceSynchronize());
                size_t pi = 0;
                all = prof.stop(&pi);
                double ct = now_ms();
                c.run = ct - bt;
                dropped = prof.decode();
                c.decode = now_ms() - ct;
                passes = prof.config_passes; // CUPTI replays internally: the config's count
                if (!all) printf("WARN kernel replay: Stop says not all passes submitted (%s)\n", kname);
            } else {
                double a = now_ms();
                CUptiResult r = prof.configure(CUPTI_UserReplay, user_range ? CUPTI_UserRange : CUPTI_AutoRange);
                if (r != CUPTI_SUCCESS && !user_range) {
                    // Auto range refused in user replay: say so, and go on with a user range
                    // pushed around the launch (for every later launch too).
                    const char *es = "?";
                    cuptiGetResultString(r, &es);
                    printf("WARN SetConfig(UserReplay, AutoRange) refused: %s (%d); using UserRange\n", es, (int)r);
                    user_range = true;
                    r = prof.configure(CUPTI_UserReplay, CUPTI_UserRange);
                }
                CUPTI_CALL(r);
                double bt = now_ms();
                c.setconfig = bt - a;
                CUDA_CALL(cudaDeviceSynchronize());
                CUpti_Checkpoint cp;
                memset(&cp, 0, sizeof cp);
                cp.structSize = CUpti_Checkpoint_STRUCT_SIZE;
                cp.ctx = ctx;
                cp.reserveDeviceMB = 0;
                cp.reserveHostMB = 0;
                cp.allowOverwrite = 0;
                cp.optimizations = ckpt_transfer ? CUPTI_CHECKPOINT_OPT_TRANSFER : CUPTI_CHECKPOINT_OPT_NONE;
                cp.pPriv = nullptr;
                CUPTI_CALL(cuptiCheckpointSave(&cp));
                CUDA_CALL(cudaDeviceSynchronize());
                double ct = now_ms();
                c.save = ct - bt;
                const size_t max_passes = prof.config_passes + 64;
                while (!all && passes < max_passes) {
                    double p0 = now_ms();
                    if (passes > 0) {
                        CUPTI_CALL(cuptiCheckpointRestore(&cp));
                        CUDA_CALL(cudaDeviceSynchronize());
                    }
                    double p1 = now_ms();
                    if (flush) {
                        flush_l2(b);
                        CUDA_CALL(cudaGetLastError());
                        CUDA_CALL(cudaDeviceSynchronize());
                    }
                    double p2 = now_ms();
                    prof.start();
                    if (user_range) prof.push(kname);
                    launch(kern, b);
                    CUDA_CALL(cudaGetLastError());
                    CUDA_CALL(cudaDeviceSynchronize());
                    if (user_range) prof.pop();
                    size_t pi = 0;
                    all = prof.stop(&pi);
                    double p3 = now_ms();
                    if (decode_each_pass) dropped += prof.decode();
                    double p4 = now_ms();
                    c.restore += p1 - p0;
                    c.flush += p2 - p1;
                    c.run += p3 - p2;
                    c.decode += p4 - p3;
                    passes++;
                    if (getenv("PROBE_VERBOSE"))
                        printf("PASSINFO %s %s %d %zu stop_pass_index=%zu all=%d\n", mode.c_str(), kname,
                               rep, passes, pi, all ? 1 : 0);
                }
                if (!all) printf("WARN %s: not all passes submitted after %zu passes\n", kname, passes);
                double dt = now_ms();
                if (!decode_each_pass) dropped = prof.decode();
                double et = now_ms();
                c.decode += et - dt;
                CUPTI_CALL(cuptiCheckpointFree(&cp));
                c.free_ = now_ms() - et;
            }
            if (mode != "none") {
                double e0 = now_ms();
                size_t nr = prof.ranges();
                std::vector<double> values;
                bool ok = prof.evaluate(values);
                c.eval = now_ms() - e0;
                if (nr != 1 || dropped)
                    printf("WARN %s %s: %zu range(s) in the image, %zu dropped\n", mode.c_str(), kname, nr, dropped);
                for (size_t m = 0; m < names.size(); m++)
                    printf("METRIC %s %s %d %s %.17g\n", mode.c_str(), kname, rep, names[m].c_str(),
                           ok ? values[m] : NAN);
                printf("PASSES %s %s %d %zu %zu\n", mode.c_str(), kname, rep, passes, prof.config_passes);
            }
            double total = now_ms() - t0;
            printf("COST %s %s %d total_ms=%.3f per_pass_ms=%.3f passes=%zu setconfig_ms=%.3f save_ms=%.3f "
                   "restore_ms=%.3f flush_ms=%.3f run_ms=%.3f decode_ms=%.3f eval_ms=%.3f free_ms=%.3f\n",
                   mode.c_str(), kname, rep, total, passes ? total / passes : total, passes, c.setconfig,
                   c.save, c.restore, c.flush, c.run, c.decode, c.eval, c.free_);
            fflush(stdout);
        }
    }

    CUDA_CALL(cudaDeviceSynchronize());
    std::vector<int> hx(N);
    CUDA_CALL(cudaMemcpy(hx.data(), b.x, sizeof(int) * N, cudaMemcpyDeviceToHost));
    long long sum = 0;
    for (int i = 0; i < N; i++) sum += hx[i];
    const long long expected = (long long)N * repeats;
    // Every element must be `repeats` (one application per sequence), not only the sum.
    bool every = true;
    for (int i = 0; i < N && every; i++) every = hx[i] == repeats;
    const bool good = sum == expected && every;
    printf("CHECK %s increment %s sum=%lld expected=%lld every_element=%d\n", mode.c_str(),
           good ? "PASS" : "FAIL", sum, expected, every ? 1 : 0);
    if (!good) failures++;

    if (mode != "none") prof.teardown();
    CUDA_CALL(cudaFree(b.x));
    CUDA_CALL(cudaFree(b.in));
    CUDA_CALL(cudaFree(b.out));
    CUDA_CALL(cudaFree(b.sums));
    if (b.flush) CUDA_CALL(cudaFree(b.flush));
    if (b.sink) CUDA_CALL(cudaFree(b.sink));
    return failures ? 3 : 0;
}
