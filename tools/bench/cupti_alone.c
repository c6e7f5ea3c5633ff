/* CUPTI alone, as a reference for tools/bench/gpu_overhead.sh: the activity collection rtrace
 * asks CUPTI for, made by a minimal client with no API records, so that the benchmark shows
 * how much of rtrace's cost is CUPTI's own.
 *
 *   gcc -O2 -shared -fPIC -I$CUDA_HOME/include -o cupti_alone.so tools/bench/cupti_alone.c -ldl
 *
 * int cupti_alone_start(const char *options): options, comma-separated:
 *   (none)  kernels (CONCURRENT_KERNEL), copies (MEMCPY) and memsets (MEMSET)
 *   ts      a timestamp callback on CLOCK_MONOTONIC, as rtrace registers
 *   cb      a subscriber with an API-enter callback on the driver functions rtrace links
 *           (names starting cuLaunch (not cuLaunchHostFunc), cuMemcpy, cuMemset,
 *           cuGraphLaunch, and the stream and context creators), reading the correlation id
 *   res     also MEMCPY2 (peer copies), CONTEXT, STREAM and FUNCTION records and the
 *           module-loaded resource callback (with cb)
 *   rt      also the whole runtime API domain on the subscriber (with cb), reading the
 *           correlation id at entry and exit, as rtrace's runtime API records do
 *   rtids   the runtime API's callbacks enabled one id at a time (every id CUPTI names), instead
 *           of the whole domain at once (with cb)
 *   rtwork  the same, less the runtime queries that never make GPU work (cudaGetDevice*,
 *           cudaGetLastError, cudaPeekAtLastError, cudaDeviceGetAttribute, cudaPointerGet-
 *           Attributes, cudaStreamIsCapturing, cudaStreamGetCaptureInfo*, cudaDriverGetVersion,
 *           cudaRuntimeGetVersion): whether CUPTI's cost is per callback delivered (with cb)
 *   rtact   runtime API activity records (CUPTI_ACTIVITY_KIND_RUNTIME: CUPTI writes each
 *           runtime call into the activity buffer itself; the PyTorch profiler's way)
 *   drvact  driver API activity records (CUPTI_ACTIVITY_KIND_DRIVER)
 * CUPTI's own settings, to measure what each costs (issue 20):
 *   kernels       kernels only (no copies, memsets or resources)
 *   buf=KIB       activity buffers of KIB KiB (default 4096, as rtrace's)
 *   devbuf=KIB    CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE
 *   poollimit=N   CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_POOL_LIMIT
 *   prealloc=N    CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_PRE_ALLOCATE_VALUE
 *   pinned        CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED (timestamps in host memory)
 *   zeroed        buffers handed over zeroed (CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER)
 *   period=MS     cuptiActivityFlushPeriod(MS)
 * Returns 0, or the first failing CUPTI result (a message goes to stderr).
 * long cupti_alone_stop(void): flushes CUPTI and returns the kernel records received.
 * CUPTI is the process's own libcupti.so.13 if loaded (PyTorch loads it), else
 * $CUPTI_ALONE_LIBRARY, else libcupti.so.13 from the library path. */
#define _GNU_SOURCE
#include <cupti.h>
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void *lib;
static atomic_long kernels;
static atomic_ulong last_correlation;

static void *sym(const char *name) {
    void *p = dlsym(lib, name);
    if (!p) fprintf(stderr, "cupti_alone: CUPTI lacks %s\n", name);
    return p;
}

#define CALL(ret, name, args, ...)                                                              \
    do {                                                                                        \
        CUptiResult(*f_) args = (CUptiResult(*) args)sym(#name);                                \
        if (!f_) return -1;                                                                     \
        CUptiResult r_ = f_(__VA_ARGS__);                                                       \
        if (r_ != CUPTI_SUCCESS) {                                                              \
            fprintf(stderr, "cupti_alone: %s -> %d\n", #name, (int)r_);                         \
            if (ret) return (int)r_;                                                            \
        }                                                                                       \
    } while (0)

static size_t buffer_bytes = 4 << 20;
static int zeroed;

static void CUPTIAPI request(uint8_t **buf, size_t *size, size_t *max) {
    *size = buffer_bytes;
    *buf = zeroed ? calloc(1, *size) : aligned_alloc(8, *size);
    *max = 0;
}

static void CUPTIAPI complete(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid) {
    (void)ctx, (void)stream, (void)size;
    CUptiResult (*next)(uint8_t *, size_t, CUpti_Activity **) =
        (CUptiResult(*)(uint8_t *, size_t, CUpti_Activity **))dlsym(lib, "cuptiActivityGetNextRecord");
    CUpti_Activity *rec = NULL;
    while (next && next(buf, valid, &rec) == CUPTI_SUCCESS)
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) atomic_fetch_add(&kernels, 1);
    free(buf);
}

static uint64_t CUPTIAPI now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void CUPTIAPI on_api(void *user, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *data) {
    (void)user, (void)cbid;
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
        const CUpti_CallbackData *d = data;
        atomic_store_explicit(&last_correlation, d->correlationId, memory_order_relaxed);
    } else if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
        const CUpti_CallbackData *d = data;
        if (d->callbackSite == CUPTI_API_ENTER) atomic_store_explicit(&last_correlation, d->correlationId, memory_order_relaxed);
    }
}

/* The number after `word=` in options (-1: absent). */
static long value_of(const char *options, const char *word) {
    size_t n = strlen(word);
    for (const char *p = options; p && *p;) {
        const char *e = strchr(p, ',');
        if (strncmp(p, word, n) == 0 && p[n] == '=') return atol(p + n + 1);
        p = e ? e + 1 : NULL;
    }
    return -1;
}

static int starts(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

static int linked(const char *name) {
    if (starts(name, "cuLaunchHostFunc")) return 0;
    return starts(name, "cuLaunch") || starts(name, "cuMemcpy") || starts(name, "cuMemset") ||
           starts(name, "cuGraphLaunch") || starts(name, "cuStreamCreate") || starts(name, "cuCtxCreate") ||
           starts(name, "cuDevicePrimaryCtxRetain") || starts(name, "cuGreenCtxCreate") ||
           starts(name, "cuGreenCtxStreamCreate");
}

/* A runtime query that never makes GPU work (rtrace's runtime_never_makes_work). */
static int query(const char *name) {
    return starts(name, "cudaGetDevice") || starts(name, "cudaGetLastError") ||
           starts(name, "cudaPeekAtLastError") || starts(name, "cudaDeviceGetAttribute") ||
           starts(name, "cudaPointerGetAttributes") || starts(name, "cudaStreamIsCapturing") ||
           starts(name, "cudaStreamGetCaptureInfo") || starts(name, "cudaDriverGetVersion") ||
           starts(name, "cudaRuntimeGetVersion");
}

static int has(const char *options, const char *word) {
    size_t n = strlen(word);
    for (const char *p = options; p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, word, n) == 0) return 1;
        p = e ? e + 1 : NULL;
    }
    return 0;
}

int cupti_alone_start(const char *options) {
    lib = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
    if (!lib && getenv("CUPTI_ALONE_LIBRARY")) lib = dlopen(getenv("CUPTI_ALONE_LIBRARY"), RTLD_NOW);
    if (!lib) lib = dlopen("libcupti.so.13", RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "cupti_alone: no libcupti.so.13: %s\n", dlerror());
        return -1;
    }
    int res = has(options, "res");
    long v;
    if ((v = value_of(options, "buf")) > 0) buffer_bytes = (size_t)v << 10;
    struct {
        const char *word;
        CUpti_ActivityAttribute attr;
        size_t scale;
    } attrs[] = {{"devbuf", CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, 1024},
                 {"poollimit", CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_POOL_LIMIT, 1},
                 {"prealloc", CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_PRE_ALLOCATE_VALUE, 1}};
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
        if ((v = value_of(options, attrs[i].word)) < 0) continue;
        size_t value = (size_t)v * attrs[i].scale, size = sizeof value;
        CALL(1, cuptiActivitySetAttribute, (CUpti_ActivityAttribute, size_t *, void *), attrs[i].attr, &size, &value);
    }
    if (has(options, "pinned") || has(options, "zeroed")) {
        uint8_t on = 1;
        size_t size = sizeof on;
        if (has(options, "pinned"))
            CALL(1, cuptiActivitySetAttribute, (CUpti_ActivityAttribute, size_t *, void *),
                 CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED, &size, &on);
        if (has(options, "zeroed")) {
            zeroed = 1;
            CALL(1, cuptiActivitySetAttribute, (CUpti_ActivityAttribute, size_t *, void *),
                 CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &size, &on);
        }
    }
    if ((v = value_of(options, "period")) > 0) CALL(1, cuptiActivityFlushPeriod, (uint32_t), (uint32_t)v);
    if (has(options, "ts")) CALL(1, cuptiActivityRegisterTimestampCallback, (CUpti_TimestampCallbackFunc), now_ns);
    CALL(1, cuptiActivityRegisterCallbacks, (CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc),
         request, complete);
    CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                  CUPTI_ACTIVITY_KIND_MEMSET,          CUPTI_ACTIVITY_KIND_MEMCPY2,
                                  CUPTI_ACTIVITY_KIND_CONTEXT,         CUPTI_ACTIVITY_KIND_STREAM,
                                  CUPTI_ACTIVITY_KIND_FUNCTION};
    int enabled = has(options, "kernels") ? 1 : res ? 7 : 3;
    for (int i = 0; i < enabled; i++) CALL(1, cuptiActivityEnable, (CUpti_ActivityKind), kinds[i]);
    if (has(options, "rtact")) CALL(1, cuptiActivityEnable, (CUpti_ActivityKind), CUPTI_ACTIVITY_KIND_RUNTIME);
    if (has(options, "drvact")) CALL(1, cuptiActivityEnable, (CUpti_ActivityKind), CUPTI_ACTIVITY_KIND_DRIVER);
    if (has(options, "cb")) {
        CUpti_SubscriberHandle sub;
        CALL(1, cuptiSubscribe, (CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *), &sub,
             (CUpti_CallbackFunc)on_api, NULL);
        CUptiResult (*name_of)(CUpti_CallbackDomain, CUpti_CallbackId, const char **) =
            (CUptiResult(*)(CUpti_CallbackDomain, CUpti_CallbackId, const char **))sym("cuptiGetCallbackName");
        if (!name_of) return -1;
        int n = 0;
        for (CUpti_CallbackId id = 1; id < 4096; id++) {
            const char *name = NULL;
            if (name_of(CUPTI_CB_DOMAIN_DRIVER_API, id, &name) != CUPTI_SUCCESS || !name || !linked(name)) continue;
            CALL(0, cuptiEnableCallback, (uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId),
                 1, sub, CUPTI_CB_DOMAIN_DRIVER_API, id);
            n++;
        }
        if (res)
            CALL(1, cuptiEnableCallback, (uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId), 1,
                 sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_LOADED);
        if (has(options, "rt"))
            CALL(1, cuptiEnableDomain, (uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain), 1, sub,
                 CUPTI_CB_DOMAIN_RUNTIME_API);
        int rt_ids = 0, rtwork = has(options, "rtwork");
        if (rtwork || has(options, "rtids")) {
            for (CUpti_CallbackId id = 1; id < 4096; id++) {
                const char *name = NULL;
                if (name_of(CUPTI_CB_DOMAIN_RUNTIME_API, id, &name) != CUPTI_SUCCESS || !name) continue;
                if (rtwork && query(name)) continue;
                CALL(0, cuptiEnableCallback, (uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId),
                     1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, id);
                rt_ids++;
            }
        }
        fprintf(stderr, "cupti_alone: callbacks on %d driver functions%s (%d runtime ids one by one)\n", n,
                has(options, "rt") ? " and the runtime API" : "", rt_ids);
    }
    return 0;
}

long cupti_alone_stop(void) {
    if (lib) {
        CUptiResult (*flush)(uint32_t) = (CUptiResult(*)(uint32_t))sym("cuptiActivityFlushAll");
        if (flush) flush(1);
    }
    return atomic_load(&kernels);
}
