// How CUPTI 13's SASS Metric API (cupti_sass_metrics.h) behaves on the real GPU (issue 21):
// what rtrace's source counters may assume. Standalone: no rtrace.
//
//   sassmetrics_probe list                       the chip's SASS metrics (name, id, description)
//   sassmetrics_probe plain [REPS]               the three kernels, untouched (for ncu)
//   sassmetrics_probe collect LAZY FLUSH [GRAN]  SASS metrics on the kernels:
//        LAZY 0|1 (enableLazyPatching); FLUSH each (sync + flush after each kernel), end (one
//        flush after all), cycle (enable, launch, sync, flush, disable around each kernel),
//        nosync (flush right after each launch, no synchronization); GRAN gpu|sm|smsp
//   sassmetrics_probe activity ORDER             with CUPTI activity CONCURRENT_KERNEL on too:
//        ORDER act-first | sass-first (which is enabled first); error codes printed;
//        ORDER other-kinds: CONTEXT, STREAM, FUNCTION, MEMCPY, MEMSET on first, no kernels
//   sassmetrics_probe pcsamp ORDER               with PC sampling enabled on the same context:
//        ORDER pc-first | sass-first
//   sassmetrics_probe streams N                  N launches of each kernel on 4 streams while a
//        second thread flushes every 5 ms; the sums must equal N x one launch's
//   sassmetrics_probe recipe OPTS                how to get every launch counted alone: the
//        kernels launched b b s s d d, each synchronized and flushed after it; OPTS comma-
//        separated: act (CONCURRENT_KERNEL activity on before the context), kind=K (activity
//        kind K on before the context: CONTEXT STREAM FUNCTION MEMCPY MEMSET), cb (a subscriber
//        with the driver's launch callbacks and the resource callbacks, as rtrace's), cycle
//        (Enable/Disable around each launch), unset (SetConfig/UnsetConfig too), lazy0, toggle
//        (kernel activity enabled and disabled once the context exists, as rtrace does).
//        Prints "RECIPE <opts> counted N/6" (launches whose own function came back with one
//        launch's instructions) and the per-launch detail.
//
// Kernels (small and deterministic, so that counts are exact and equal ncu's):
//   bank_conflicts  a warp reads a column of a 32x32 float tile: 32-way bank conflict
//   strided_reads   each lane reads global memory 32 floats apart: one sector per lane
//   divergent       lanes branch on their parity and on data: divergent branch targets
// Built with -lineinfo. With -DSASS_INJECT the file is a CUDA injection library instead
// (CUDA_INJECTION64_PATH): SASS metrics enabled lazily on every context from CUPTI's
// context-created callback, a thread flushing every 20 ms, totals printed at exit; with
// INJ_ACTIVITY=1 CUPTI's kernel activity is enabled as well.
//
// Output lines: "RC <what> <code> <name>" for each CUPTI call, "METRIC <id> <name> <desc>",
// "CHOSEN <role> <name> <id>", "REC <tag> crc=.. fidx=.. fn=.. pc=.. <metric>=<value>..."
// (one per record, values summed over instances), "DATA <tag> records=.. instances=..",
// "TIME <tag> <kernel> <ms>", "SUM <tag> <kernel> <metric> <value>", "CHECK <name> ok|bad ...".
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <cupti_pcsampling.h>
#include <cupti_profiler_target.h>
#include <cupti_sass_metrics.h>
#include <cupti_target.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

static const char *cupti_name(CUptiResult r)
{
    const char *s = nullptr;
    cuptiGetResultString(r, &s);
    return s ? s : "?";
}

static CUptiResult rc(const char *what, CUptiResult r)
{
    printf("RC %s %d %s\n", what, (int)r, cupti_name(r));
    fflush(stdout);
    return r;
}

// The six counters rtrace wants (roles), each with the names the chip may give it.
struct Role {
    const char *role;
    std::vector<const char *> names;
};
static const std::vector<Role> kRoles = {
    {"inst_executed", {"smsp__sass_inst_executed"}},
    {"thread_inst_pred_on", {"smsp__sass_thread_inst_executed_pred_on"}},
    {"thread_inst", {"smsp__sass_thread_inst_executed"}},
    {"global_sectors", {"smsp__sass_sectors_mem_global"}},
    {"global_sectors_ideal", {"smsp__sass_sectors_mem_global_ideal"}},
    {"shared_wavefronts",
     {"smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared",
      "smsp__sass_l1tex_pipe_lsu_wavefronts_mem_shared"}},
    {"shared_wavefronts_ideal",
     {"smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_ideal",
      "smsp__sass_l1tex_pipe_lsu_wavefronts_mem_shared_ideal"}},
    {"divergent_targets", {"smsp__sass_branch_targets_threads_divergent"}},
};

static std::map<uint64_t, std::string> g_id_name;
static std::vector<CUpti_SassMetrics_Config> g_configs;
static std::string g_chip;

static bool chip_name(int dev)
{
    CUpti_Profiler_Initialize_Params ip = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
    if (rc("cuptiProfilerInitialize", cuptiProfilerInitialize(&ip)) != CUPTI_SUCCESS)
        return false;
    CUpti_Device_GetChipName_Params cp = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};
    cp.deviceIndex = dev;
    if (rc("cuptiDeviceGetChipName", cuptiDeviceGetChipName(&cp)) != CUPTI_SUCCESS)
        return false;
    g_chip = cp.pChipName;
    printf("CHIP %s\n", g_chip.c_str());
    return true;
}

static void list_metrics(bool print)
{
    CUpti_SassMetrics_GetNumOfMetrics_Params np = {CUpti_SassMetrics_GetNumOfMetrics_Params_STRUCT_SIZE};
    np.pChipName = g_chip.c_str();
    if (rc("cuptiSassMetricsGetNumOfMetrics", cuptiSassMetricsGetNumOfMetrics(&np)) != CUPTI_SUCCESS)
        return;
    std::vector<CUpti_SassMetrics_MetricDetails> list(np.numOfMetrics);
    CUpti_SassMetrics_GetMetrics_Params mp = {CUpti_SassMetrics_GetMetrics_Params_STRUCT_SIZE};
    mp.pChipName = g_chip.c_str();
    mp.numOfMetrics = list.size();
    mp.pMetricsList = list.data();
    if (rc("cuptiSassMetricsGetMetrics", cuptiSassMetricsGetMetrics(&mp)) != CUPTI_SUCCESS)
        return;
    printf("METRICS %zu\n", list.size());
    for (auto &m : list) {
        g_id_name[m.metricId] = m.pMetricName;
        if (print)
            printf("METRIC %llu %s | %s\n", (unsigned long long)m.metricId, m.pMetricName,
                   m.pMetricDescription ? m.pMetricDescription : "");
    }
}

static void choose_metrics(uint8_t gran)
{
    g_configs.clear();
    for (auto &r : kRoles) {
        bool found = false;
        for (auto n : r.names) {
            CUpti_SassMetrics_GetProperties_Params pp = {CUpti_SassMetrics_GetProperties_Params_STRUCT_SIZE};
            pp.pChipName = g_chip.c_str();
            pp.pMetricName = n;
            CUptiResult r2 = cuptiSassMetricsGetProperties(&pp);
            if (r2 != CUPTI_SUCCESS) {
                printf("NOMETRIC %s %s %d %s\n", r.role, n, (int)r2, cupti_name(r2));
                continue;
            }
            printf("CHOSEN %s %s %llu\n", r.role, n, (unsigned long long)pp.metric.metricId);
            g_id_name[pp.metric.metricId] = n;
            CUpti_SassMetrics_Config c;
            c.metricId = pp.metric.metricId;
            c.outputGranularity = gran;
            g_configs.push_back(c);
            found = true;
            break;
        }
        if (!found)
            printf("MISSING %s\n", r.role);
    }
}

static CUptiResult set_config(int dev)
{
    CUpti_SassMetricsSetConfig_Params sp = {CUpti_SassMetricsSetConfig_Params_STRUCT_SIZE};
    sp.numOfMetricConfig = g_configs.size();
    sp.pConfigs = g_configs.data();
    sp.deviceIndex = dev;
    return rc("cuptiSassMetricsSetConfig", cuptiSassMetricsSetConfig(&sp));
}

static CUptiResult sass_enable(CUcontext ctx, int lazy)
{
    CUpti_SassMetricsEnable_Params ep = {CUpti_SassMetricsEnable_Params_STRUCT_SIZE};
    ep.ctx = ctx;
    ep.enableLazyPatching = (uint8_t)lazy;
    return rc("cuptiSassMetricsEnable", cuptiSassMetricsEnable(&ep));
}

static CUptiResult sass_disable(CUcontext ctx)
{
    CUpti_SassMetricsDisable_Params dp = {CUpti_SassMetricsDisable_Params_STRUCT_SIZE};
    dp.ctx = ctx;
    CUptiResult r = rc("cuptiSassMetricsDisable", cuptiSassMetricsDisable(&dp));
    printf("DISABLE dropped=%zu\n", dp.numOfDroppedRecords);
    return r;
}

// (function, pc) -> metric name -> value, summed over flushes.
static std::mutex g_lock;
static std::map<std::pair<std::string, uint32_t>, std::map<std::string, uint64_t>> g_sum;
static std::map<std::string, uint32_t> g_fn_crc;

// Flushes what CUPTI holds for ctx; prints each record when print.
static size_t flush(CUcontext ctx, const char *tag, bool print)
{
    CUpti_SassMetricsGetDataProperties_Params gp = {CUpti_SassMetricsGetDataProperties_Params_STRUCT_SIZE};
    gp.ctx = ctx;
    CUptiResult r = cuptiSassMetricsGetDataProperties(&gp);
    if (print || r != CUPTI_SUCCESS)
        rc("cuptiSassMetricsGetDataProperties", r);
    if (r != CUPTI_SUCCESS)
        return 0;
    if (print)
        printf("DATA %s records=%zu instances=%zu\n", tag, gp.numOfPatchedInstructionRecords,
               gp.numOfInstances);
    if (gp.numOfPatchedInstructionRecords == 0 || gp.numOfInstances == 0)
        return 0;
    size_t n = gp.numOfPatchedInstructionRecords, k = gp.numOfInstances;
    std::vector<CUpti_SassMetrics_Data> data(n);
    std::vector<CUpti_SassMetrics_InstanceValue> vals(n * k);
    for (size_t i = 0; i < n; i++) {
        memset(&data[i], 0, sizeof data[i]);
        data[i].structSize = sizeof(CUpti_SassMetrics_Data);
        data[i].pInstanceValues = &vals[i * k];
    }
    CUpti_SassMetricsFlushData_Params fp = {CUpti_SassMetricsFlushData_Params_STRUCT_SIZE};
    fp.ctx = ctx;
    fp.numOfPatchedInstructionRecords = n;
    fp.numOfInstances = k;
    fp.pMetricsData = data.data();
    r = cuptiSassMetricsFlushData(&fp);
    if (print || r != CUPTI_SUCCESS)
        rc("cuptiSassMetricsFlushData", r);
    if (r != CUPTI_SUCCESS)
        return 0;
    std::lock_guard<std::mutex> g(g_lock);
    for (size_t i = 0; i < n; i++) {
        const CUpti_SassMetrics_Data &d = data[i];
        std::string fn = d.functionName ? d.functionName : "?";
        g_fn_crc[fn] = d.cubinCrc;
        std::map<std::string, uint64_t> rec;
        std::string raw;
        for (size_t j = 0; j < k; j++) {
            auto it = g_id_name.find(d.pInstanceValues[j].metricId);
            std::string name = it != g_id_name.end() ? it->second
                                                     : "id" + std::to_string(d.pInstanceValues[j].metricId);
            rec[name] += d.pInstanceValues[j].value;
            if (j < 4)
                raw += " " + std::to_string(d.pInstanceValues[j].metricId) + ":" +
                       std::to_string(d.pInstanceValues[j].value);
        }
        auto &s = g_sum[{fn, d.pcOffset}];
        for (auto &kv : rec)
            s[kv.first] += kv.second;
        if (print) {
            printf("REC %s crc=0x%08x fidx=%u fn=%s pc=0x%x", tag, d.cubinCrc, d.functionIndex, fn.c_str(),
                   d.pcOffset);
            for (auto &kv : rec)
                printf(" %s=%llu", kv.first.c_str(), (unsigned long long)kv.second);
            printf(" | raw%s\n", raw.c_str());
        }
    }
    return n;
}

static void print_sums(const char *tag)
{
    std::map<std::pair<std::string, std::string>, uint64_t> per_fn;
    for (auto &e : g_sum)
        for (auto &kv : e.second)
            per_fn[{e.first.first, kv.first}] += kv.second;
    for (auto &e : per_fn)
        printf("SUM %s %s %s %llu\n", tag, e.first.first.c_str(), e.first.second.c_str(),
               (unsigned long long)e.second);
    fflush(stdout);
}

#ifndef SASS_INJECT
// ---- the kernels --------------------------------------------------------------------------
#define CHECK(call)                                                                          \
    do {                                                                                     \
        cudaError_t e_ = (call);                                                             \
        if (e_ != cudaSuccess) {                                                             \
            printf("CUDAERR %s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            fflush(stdout);                                                                  \
            exit(1);                                                                         \
        }                                                                                    \
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
    for (int i = 0; i < iters; ++i)
        acc += tile[tx][(i + ty) & 31];  // 32 lanes, one bank: 32-way conflict
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

__global__ void strided_reads(const float *in, float *out, int iters)
{
    unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 0.0f;
    for (int i = 0; i < iters; ++i)
        acc += in[(tid * 32u + (unsigned)i) & ((1u << 22) - 1)];  // 32 floats apart: a sector per lane
    out[tid] = acc;
}

__global__ void divergent(const float *in, float *out, int iters)
{
    unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    float acc = in[tid];
    for (int i = 0; i < iters; ++i) {
        if ((threadIdx.x + i) & 1)  // half the warp each way
            acc = acc * 1.5f + 1.0f;
        else
            acc = acc * 0.5f - 1.0f;
        if ((threadIdx.x & 3) == 0)  // a quarter of the warp
            acc += sqrtf(fabsf(acc));
    }
    out[tid] = acc;
}

static const int kBlocks = 8, kThreads = 256;
static float *d_in, *d_out;
static cudaEvent_t t0, t1;

static void launch(int which, cudaStream_t s)
{
    if (which == 0)
        bank_conflicts<<<kBlocks, kThreads, 0, s>>>(d_out, 64);
    else if (which == 1)
        strided_reads<<<kBlocks, kThreads, 0, s>>>(d_in, d_out, 16);
    else
        divergent<<<kBlocks, kThreads, 0, s>>>(d_in, d_out, 16);
    CHECK(cudaGetLastError());
}
static const char *kNames[] = {"bank_conflicts", "strided_reads", "divergent"};

static void timed(int which, const char *tag)
{
    CHECK(cudaEventRecord(t0));
    launch(which, 0);
    CHECK(cudaEventRecord(t1));
    CHECK(cudaEventSynchronize(t1));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, t0, t1));
    printf("TIME %s %s %.3f\n", tag, kNames[which], ms);
    fflush(stdout);
}

static CUcontext setup()
{
    CHECK(cudaFree(0));
    CUcontext ctx = nullptr;
    cuCtxGetCurrent(&ctx);
    CHECK(cudaMalloc(&d_in, (1u << 22) * sizeof(float)));
    CHECK(cudaMalloc(&d_out, kBlocks * kThreads * sizeof(float)));
    CHECK(cudaMemset(d_in, 0, (1u << 22) * sizeof(float)));
    CHECK(cudaEventCreate(&t0));
    CHECK(cudaEventCreate(&t1));
    CHECK(cudaDeviceSynchronize());
    return ctx;
}

static uint8_t granularity(const char *g)
{
    if (!strcmp(g, "sm"))
        return CUPTI_SASS_METRICS_OUTPUT_GRANULARITY_SM;
    if (!strcmp(g, "smsp"))
        return CUPTI_SASS_METRICS_OUTPUT_GRANULARITY_SMSP;
    return CUPTI_SASS_METRICS_OUTPUT_GRANULARITY_GPU;
}

// collect: the three kernels, each launched twice, metrics flushed as FLUSH says.
static int collect(CUcontext ctx, int lazy, const char *mode, const char *tag)
{
    bool cycle = !strcmp(mode, "cycle");
    if (!cycle && sass_enable(ctx, lazy) != CUPTI_SUCCESS)
        return 1;
    for (int which = 0; which < 3; which++) {
        if (cycle)
            sass_enable(ctx, lazy);
        for (int rep = 0; rep < 2; rep++) {
            if (!strcmp(mode, "nosync")) {
                launch(which, 0);
                char t[64];
                snprintf(t, sizeof t, "%s-%s-%d-nosync", tag, kNames[which], rep);
                flush(ctx, t, true);
                CHECK(cudaDeviceSynchronize());
            } else {
                timed(which, tag);
            }
            if (!strcmp(mode, "each") || cycle || !strcmp(mode, "nosync")) {
                char t[64];
                snprintf(t, sizeof t, "%s-%s-%d", tag, kNames[which], rep);
                flush(ctx, t, true);
            }
        }
        if (cycle)
            sass_disable(ctx);
    }
    if (!cycle) {
        flush(ctx, tag, true);
        sass_disable(ctx);
    }
    print_sums(tag);
    return 0;
}

// Activity buffers for the activity experiment.
static std::atomic<long> g_kernel_records;
static void CUPTIAPI buf_requested(uint8_t **buf, size_t *size, size_t *max)
{
    *size = 1 << 20;
    *buf = (uint8_t *)aligned_alloc(8, *size);
    *max = 0;
}
static void CUPTIAPI buf_completed(CUcontext, uint32_t, uint8_t *buf, size_t, size_t valid)
{
    CUpti_Activity *rec = nullptr;
    while (cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS)
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL)
            g_kernel_records++;
    free(buf);
}
static CUptiResult activity_on()
{
    rc("cuptiActivityRegisterCallbacks", cuptiActivityRegisterCallbacks(buf_requested, buf_completed));
    return rc("cuptiActivityEnable(CONCURRENT_KERNEL)", cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
}
// The kinds rtrace's GPU activity enables besides kernels (resources, copies, memsets).
static void other_kinds_on()
{
    rc("cuptiActivityRegisterCallbacks", cuptiActivityRegisterCallbacks(buf_requested, buf_completed));
    rc("cuptiActivityEnable(CONTEXT)", cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONTEXT));
    rc("cuptiActivityEnable(STREAM)", cuptiActivityEnable(CUPTI_ACTIVITY_KIND_STREAM));
    rc("cuptiActivityEnable(FUNCTION)", cuptiActivityEnable(CUPTI_ACTIVITY_KIND_FUNCTION));
    rc("cuptiActivityEnable(MEMCPY)", cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
    rc("cuptiActivityEnable(MEMSET)", cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
}

static CUptiResult pcsamp_on(CUcontext ctx)
{
    CUpti_PCSamplingEnableParams e = {};
    e.size = CUpti_PCSamplingEnableParamsSize;
    e.ctx = ctx;
    return rc("cuptiPCSamplingEnable", cuptiPCSamplingEnable(&e));
}

static void pcsamp_off(CUcontext ctx)
{
    CUpti_PCSamplingDisableParams d = {};
    d.size = CUpti_PCSamplingDisableParamsSize;
    d.ctx = ctx;
    rc("cuptiPCSamplingDisable", cuptiPCSamplingDisable(&d));
}

static void CUPTIAPI recipe_callback(void *, CUpti_CallbackDomain, CUpti_CallbackId, const void *) {}

static bool has_opt(const std::string &opts, const char *o)
{
    std::string all = "," + opts + ",";
    return all.find(std::string(",") + o + ",") != std::string::npos;
}

// Before the context: activity kinds the options ask for.
static void recipe_early(const std::string &opts)
{
    if (has_opt(opts, "act"))
        activity_on();
    const char *kinds[] = {"CONTEXT", "STREAM", "FUNCTION", "MEMCPY", "MEMSET"};
    const CUpti_ActivityKind ids[] = {CUPTI_ACTIVITY_KIND_CONTEXT, CUPTI_ACTIVITY_KIND_STREAM,
                                      CUPTI_ACTIVITY_KIND_FUNCTION, CUPTI_ACTIVITY_KIND_MEMCPY,
                                      CUPTI_ACTIVITY_KIND_MEMSET};
    for (int i = 0; i < 5; i++)
        if (has_opt(opts, (std::string("kind=") + kinds[i]).c_str())) {
            rc("cuptiActivityRegisterCallbacks", cuptiActivityRegisterCallbacks(buf_requested, buf_completed));
            rc((std::string("cuptiActivityEnable(") + kinds[i] + ")").c_str(), cuptiActivityEnable(ids[i]));
        }
    if (has_opt(opts, "cb")) {
        CUpti_SubscriberHandle sub;
        rc("cuptiSubscribe", cuptiSubscribe(&sub, recipe_callback, nullptr));
        rc("cuptiEnableCallback(cuLaunchKernel)",
           cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
        rc("cuptiEnableCallback(MODULE_LOADED)",
           cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_LOADED));
        rc("cuptiEnableCallback(CONTEXT_CREATED)",
           cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED));
    }
}

// The instructions one launch of each kernel executes (ncu, H100): what a launch counted alone
// must give.
static const uint64_t kOneLaunch[] = {30336, 9152, 26880};

static int recipe(CUcontext ctx, const std::string &opts)
{
    bool cycle = has_opt(opts, "cycle") || has_opt(opts, "unset");
    bool unset = has_opt(opts, "unset");
    int lazy = has_opt(opts, "lazy0") ? 0 : 1;
    if (!cycle)
        sass_enable(ctx, lazy);
    int counted = 0;
    const int order[] = {0, 0, 1, 1, 2, 2};
    for (int i = 0; i < 6; i++) {
        int w = order[i];
        if (unset && i > 0)
            set_config(0);
        if (cycle)
            sass_enable(ctx, lazy);
        g_sum.clear();
        char tag[64];
        snprintf(tag, sizeof tag, "recipe-%d-%s", i, kNames[w]);
        timed(w, tag);
        CHECK(cudaDeviceSynchronize());
        size_t n = flush(ctx, tag, false);
        uint64_t own = 0;
        std::string fns;
        std::map<std::string, uint64_t> per_fn;
        for (auto &e : g_sum)
            per_fn[e.first.first] += e.second["smsp__sass_inst_executed"];
        for (auto &f : per_fn) {
            fns += " " + f.first + "=" + std::to_string(f.second);
            if (f.first.find(kNames[w]) != std::string::npos)
                own = f.second;
        }
        bool ok = own == kOneLaunch[w];
        counted += ok;
        printf("LAUNCH %d %s records=%zu own_inst=%llu %s |%s\n", i, kNames[w], n, (unsigned long long)own,
               ok ? "ok" : "no", fns.c_str());
        if (cycle)
            sass_disable(ctx);
        if (unset) {
            CUpti_SassMetricsUnsetConfig_Params up = {CUpti_SassMetricsUnsetConfig_Params_STRUCT_SIZE};
            up.deviceIndex = 0;
            rc("cuptiSassMetricsUnsetConfig", cuptiSassMetricsUnsetConfig(&up));
        }
    }
    if (!cycle)
        sass_disable(ctx);
    printf("RECIPE %s counted %d/6\n", opts.c_str(), counted);
    return 0;
}

int main(int argc, char **argv)
{
    const char *cmd = argc > 1 ? argv[1] : "list";
    setvbuf(stdout, nullptr, _IOLBF, 0);
    if (!strcmp(cmd, "plain")) {
        setup();
        int reps = argc > 2 ? atoi(argv[2]) : 1;
        for (int r = 0; r < reps; r++)
            for (int w = 0; w < 3; w++)
                timed(w, "plain");
        return 0;
    }
    // Before any CUPTI profiler initialization: does the SASS API need it?
    CUpti_SassMetrics_GetNumOfMetrics_Params np0 = {CUpti_SassMetrics_GetNumOfMetrics_Params_STRUCT_SIZE};
    np0.pChipName = "GH100";
    rc("cuptiSassMetricsGetNumOfMetrics(before-init,GH100)", cuptiSassMetricsGetNumOfMetrics(&np0));
    if (!strcmp(cmd, "activity") && argc > 2 && !strcmp(argv[2], "act-first"))
        activity_on();
    if (!strcmp(cmd, "activity") && argc > 2 && !strcmp(argv[2], "other-kinds"))
        other_kinds_on();
    std::string opts = !strcmp(cmd, "recipe") && argc > 2 ? argv[2] : "";
    if (!strcmp(cmd, "recipe"))
        recipe_early(opts);
    CUcontext ctx = setup();
    if (!strcmp(cmd, "recipe") && has_opt(opts, "toggle")) {
        // Kernel activity enabled and disabled once the context exists (what rtrace does).
        rc("cuptiActivityRegisterCallbacks", cuptiActivityRegisterCallbacks(buf_requested, buf_completed));
        rc("cuptiActivityEnable(CONCURRENT_KERNEL)", cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
        rc("cuptiActivityDisable(CONCURRENT_KERNEL)", cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    }
    if (!chip_name(0))
        return 2;
    uint8_t gran = granularity(argc > 4 ? argv[4] : "gpu");
    list_metrics(!strcmp(cmd, "list"));
    if (!strcmp(cmd, "list"))
        return 0;
    choose_metrics(gran);
    if (!strcmp(cmd, "pcsamp") && argc > 2 && !strcmp(argv[2], "pc-first"))
        pcsamp_on(ctx);
    if (set_config(0) != CUPTI_SUCCESS && strcmp(cmd, "activity"))
        return 3;
    int status = 0;
    if (!strcmp(cmd, "recipe")) {
        status = recipe(ctx, opts);
        if (has_opt(opts, "unset")) {
            CHECK(cudaDeviceSynchronize());
            printf("DONE %s\n", cmd);
            return status;
        }
    } else if (!strcmp(cmd, "collect")) {
        int lazy = argc > 2 ? atoi(argv[2]) : 1;
        const char *mode = argc > 3 ? argv[3] : "each";
        std::string tag = std::string("lazy") + std::to_string(lazy) + "-" + mode;
        status = collect(ctx, lazy, mode, tag.c_str());
        // A second enable on the same context after a disable: still works?
        g_sum.clear();
        if (sass_enable(ctx, lazy) == CUPTI_SUCCESS) {
            timed(0, "again");
            flush(ctx, "again", false);
            sass_disable(ctx);
            print_sums("again");
        }
    } else if (!strcmp(cmd, "activity")) {
        bool sass_first = argc > 2 && !strcmp(argv[2], "sass-first");
        CUptiResult e = sass_enable(ctx, 1);
        if (sass_first)
            activity_on();
        for (int w = 0; w < 3; w++)
            timed(w, "activity");
        flush(ctx, "activity", true);
        if (e == CUPTI_SUCCESS)
            sass_disable(ctx);
        rc("cuptiActivityFlushAll", cuptiActivityFlushAll(1));
        printf("ACTIVITY kernel_records=%ld (3 launched)\n", g_kernel_records.load());
        print_sums("activity");
    } else if (!strcmp(cmd, "pcsamp")) {
        bool sass_first = argc > 2 && !strcmp(argv[2], "sass-first");
        CUptiResult e = sass_enable(ctx, 1);
        if (sass_first)
            pcsamp_on(ctx);
        for (int w = 0; w < 3; w++)
            timed(w, "pcsamp");
        flush(ctx, "pcsamp", true);
        if (e == CUPTI_SUCCESS)
            sass_disable(ctx);
        pcsamp_off(ctx);
        print_sums("pcsamp");
    } else if (!strcmp(cmd, "streams")) {
        int n = argc > 2 ? atoi(argv[2]) : 200;
        // One launch of each, alone, for the expected per-launch sums.
        sass_enable(ctx, 1);
        for (int w = 0; w < 3; w++)
            timed(w, "one");
        flush(ctx, "one", false);
        auto one = g_sum;
        g_sum.clear();
        std::atomic<bool> stop{false};
        std::atomic<long> flushes{0};
        std::thread flusher([&] {
            cuCtxSetCurrent(ctx);
            while (!stop) {
                flush(ctx, "bg", false);
                flushes++;
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
            }
        });
        cudaStream_t st[4];
        for (auto &s : st)
            CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        auto a = std::chrono::steady_clock::now();
        for (int i = 0; i < n; i++)
            for (int w = 0; w < 3; w++)
                launch(w, st[(i + w) & 3]);
        CHECK(cudaDeviceSynchronize());
        auto b = std::chrono::steady_clock::now();
        stop = true;
        flusher.join();
        flush(ctx, "last", false);
        printf("STREAMS launches=%d flushes=%ld ms=%.1f\n", 3 * n, flushes.load(),
               std::chrono::duration<double, std::milli>(b - a).count());
        int bad = 0, good = 0;
        for (auto &e : one)
            for (auto &kv : e.second) {
                uint64_t want = kv.second * (uint64_t)n, got = g_sum[e.first][kv.first];
                if (want == got)
                    good++;
                else if (bad++ < 10)
                    printf("STREAMS mismatch %s pc=0x%x %s one=%llu got=%llu want=%llu\n",
                           e.first.first.c_str(), e.first.second, kv.first.c_str(),
                           (unsigned long long)kv.second, (unsigned long long)got, (unsigned long long)want);
            }
        printf("CHECK streams-sums %s equal=%d unequal=%d\n", bad || !good ? "bad" : "ok", good, bad);
        print_sums("streams");
        sass_disable(ctx);
    }
    CUpti_SassMetricsUnsetConfig_Params up = {CUpti_SassMetricsUnsetConfig_Params_STRUCT_SIZE};
    up.deviceIndex = 0;
    rc("cuptiSassMetricsUnsetConfig", cuptiSassMetricsUnsetConfig(&up));
    CHECK(cudaDeviceSynchronize());
    printf("DONE %s\n", cmd);
    return status;
}

#else
// ---- the injection library ------------------------------------------------------------------
static std::atomic<bool> g_stop;
static std::vector<CUcontext> g_ctxs;
static std::atomic<long> g_records, g_flushes, g_kernels;
static std::thread *g_thread;
static bool g_configured;

static void CUPTIAPI inj_buf_requested(uint8_t **buf, size_t *size, size_t *max)
{
    *size = 1 << 20;
    *buf = (uint8_t *)aligned_alloc(8, *size);
    *max = 0;
}
static void CUPTIAPI inj_buf_completed(CUcontext, uint32_t, uint8_t *buf, size_t, size_t valid)
{
    CUpti_Activity *rec = nullptr;
    while (cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS)
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
            g_kernels++;
    free(buf);
}

static void inj_flush_all()
{
    std::vector<CUcontext> ctxs;
    {
        std::lock_guard<std::mutex> g(g_lock);
        ctxs = g_ctxs;
    }
    for (auto c : ctxs)
        g_records += flush(c, "inj", false);
    g_flushes++;
}

static void inj_exit()
{
    g_stop = true;
    if (g_thread && g_thread->joinable())
        g_thread->join();
    cuCtxSynchronize();
    inj_flush_all();
    if (getenv("INJ_ACTIVITY"))
        cuptiActivityFlushAll(1);
    print_sums("inj");
    printf("INJ contexts=%zu records=%ld flushes=%ld kernel_activity_records=%ld\n", g_ctxs.size(),
           g_records.load(), g_flushes.load(), g_kernels.load());
    fflush(stdout);
}

static void CUPTIAPI inj_callback(void *, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *data)
{
    if (domain != CUPTI_CB_DOMAIN_RESOURCE || cbid != CUPTI_CBID_RESOURCE_CONTEXT_CREATED)
        return;
    const CUpti_ResourceData *rd = (const CUpti_ResourceData *)data;
    CUdevice dev = 0;
    cuCtxGetDevice(&dev);
    if (!g_configured) {
        if (!chip_name((int)dev))
            return;
        list_metrics(false);
        choose_metrics(CUPTI_SASS_METRICS_OUTPUT_GRANULARITY_GPU);
        if (set_config((int)dev) != CUPTI_SUCCESS)
            return;
        g_configured = true;
    }
    if (sass_enable(rd->context, 1) == CUPTI_SUCCESS) {
        std::lock_guard<std::mutex> g(g_lock);
        g_ctxs.push_back(rd->context);
    }
}

extern "C" int InitializeInjection(void)
{
    setvbuf(stdout, nullptr, _IOLBF, 0);
    CUpti_SubscriberHandle sub;
    rc("cuptiSubscribe", cuptiSubscribe(&sub, inj_callback, nullptr));
    rc("cuptiEnableCallback(CONTEXT_CREATED)",
       cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED));
    if (getenv("INJ_ACTIVITY")) {
        rc("cuptiActivityRegisterCallbacks", cuptiActivityRegisterCallbacks(inj_buf_requested, inj_buf_completed));
        rc("cuptiActivityEnable(CONCURRENT_KERNEL)", cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    }
    atexit(inj_exit);
    if (getenv("INJ_NOTHREAD"))
        return 1;
    g_thread = new std::thread([] {
        while (!g_stop) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            inj_flush_all();
        }
    });
    return 1;
}
#endif
