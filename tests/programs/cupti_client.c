/* cupti_client: a CUPTI activity client, as a profiler would write one, run against the
 * simulated CUPTI (tests/simcupti, linked with -lcupti) and the simulated driver.
 *
 * It registers a timestamp callback (a fixed clock, so that every time printed is exact:
 * 1000000000 + simcuda's virtual ns) and buffer callbacks (1024-byte buffers, so records span
 * several buffers), enables kernel, memcpy and memset records, runs copies, memsets and kernels
 * on four streams, flushes, then enables driver API and external-correlation records around
 * one more launch, which it flushes before the kernel ends (plainly: nothing comes; forced: its
 * record comes without timestamps), then once more after. The completion callback (simcupti's
 * delivery thread) copies every record's fields; main prints them, one line each, in delivery
 * order, after the last flush (expected output: tests/programs/README.md). Exits 1 on any
 * unexpected result. */
#include "common.h"

#include <cupti.h>
#include <pthread.h>
#include <stdarg.h>
#include <string.h>

#define N 1024
#define BUFFER_SIZE 1024
#define T0 1000000000ull
#define MAX_LINES 256

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char lines[MAX_LINES][256];
static int nlines, nbuffers;

#define CUPTI_CHECK(call)                                                                   \
    do {                                                                                    \
        CUptiResult r_ = (call);                                                            \
        if (r_ != CUPTI_SUCCESS) {                                                          \
            const char *s_ = "?";                                                           \
            cuptiGetResultString(r_, &s_);                                                  \
            fprintf(stderr, "%s:%d: %s returned %d (%s)\n", __FILE__, __LINE__, #call,      \
                    (int)r_, s_);                                                           \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

static uint64_t CUPTIAPI fixed_clock(void) { return T0; }

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *buffer = aligned_alloc(8, BUFFER_SIZE);
    *size = BUFFER_SIZE;
    *max_records = 0;
}

static const char *copy_kind(unsigned k) {
    switch (k) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "HtoH";
    default: return "?";
    }
}

static const char *memory_kind(unsigned k) {
    switch (k) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE: return "pageable";
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED: return "pinned";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE: return "device";
    default: return "?";
    }
}

/* Times relative to the fixed clock: virtual ns, or -1 for a 0 (unknown) timestamp. */
static long long t(uint64_t ns) { return ns ? (long long)(ns - T0) : -1; }

static void add_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void add_line(const char *fmt, ...) {
    REQUIRE(nlines < MAX_LINES, "too many records");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(lines[nlines++], sizeof lines[0], fmt, ap);
    va_end(ap);
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid) {
    (void)ctx;
    (void)stream;
    pthread_mutex_lock(&lock);
    int records = 0;
    CUpti_Activity *r = NULL;
    CUptiResult st;
    while ((st = cuptiActivityGetNextRecord(buffer, valid, &r)) == CUPTI_SUCCESS) {
        records++;
        switch (r->kind) {
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
            CUpti_ActivityKernel10 *k = (CUpti_ActivityKernel10 *)r;
            add_line("kernel corr=%u name=%s start=%lld end=%lld completed=%lld dev=%u ctx=%u "
                     "stream=%u grid=%d,%d,%d block=%d,%d,%d shared=%d/%d regs=%u grid_id=%lld",
                     k->correlationId, k->name, t(k->start), t(k->end), t(k->completed),
                     k->deviceId, k->contextId, k->streamId, k->gridX, k->gridY, k->gridZ,
                     k->blockX, k->blockY, k->blockZ, k->staticSharedMemory,
                     k->dynamicSharedMemory, k->registersPerThread, (long long)k->gridId);
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
            CUpti_ActivityMemcpy6 *m = (CUpti_ActivityMemcpy6 *)r;
            add_line("memcpy corr=%u %s %s->%s async=%d bytes=%llu start=%lld end=%lld dev=%u "
                     "ctx=%u stream=%u",
                     m->correlationId, copy_kind(m->copyKind), memory_kind(m->srcKind),
                     memory_kind(m->dstKind), (m->flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) != 0,
                     (unsigned long long)m->bytes, t(m->start), t(m->end), m->deviceId,
                     m->contextId, m->streamId);
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
            CUpti_ActivityMemset4 *m = (CUpti_ActivityMemset4 *)r;
            add_line("memset corr=%u value=%u %s async=%d bytes=%llu start=%lld end=%lld dev=%u "
                     "ctx=%u stream=%u",
                     m->correlationId, m->value, memory_kind(m->memoryKind),
                     (m->flags & CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC) != 0,
                     (unsigned long long)m->bytes, t(m->start), t(m->end), m->deviceId,
                     m->contextId, m->streamId);
            break;
        }
        case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
            CUpti_ActivityExternalCorrelation *e = (CUpti_ActivityExternalCorrelation *)r;
            add_line("external kind=%d id=%llu corr=%u", (int)e->externalKind,
                     (unsigned long long)e->externalId, e->correlationId);
            break;
        }
        case CUPTI_ACTIVITY_KIND_DRIVER: {
            CUpti_ActivityAPI *a = (CUpti_ActivityAPI *)r;
            add_line("driver cbid=%u corr=%u start=%lld end=%lld result=%u", a->cbid,
                     a->correlationId, t(a->start), t(a->end), a->returnValue);
            break;
        }
        default:
            add_line("unexpected kind %d", (int)r->kind);
        }
    }
    REQUIRE(st == CUPTI_ERROR_MAX_LIMIT_REACHED, "cuptiActivityGetNextRecord: %d", (int)st);
    REQUIRE(valid <= size, "valid=%zu size=%zu", valid, size);
    add_line("buffer %d: %d records, %zu bytes", ++nbuffers, records, valid);
    pthread_mutex_unlock(&lock);
    free(buffer);
}

static uint32_t stream_id(CUcontext ctx, CUstream s, uint8_t per_thread) {
    uint32_t id = 0;
    CUPTI_CHECK(cuptiGetStreamIdEx(ctx, s, per_thread, &id));
    return id;
}

int main(int argc, char **argv) {
    /* "late": the timestamp callback is registered after the driver is up and the kinds are
     * enabled (as the PyTorch profiler does), so CUPTI switches clocks on the way. */
    int late = argc > 1 && strcmp(argv[1], "late") == 0;
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction vecadd, fill, empty;
    CUstream s1, s2;
    CUdeviceptr a, b, c;
    float *pinned, ha[N], hb[N];
    unsigned int hc[N];
    uint32_t version;
    uint64_t now;
    size_t dropped;

    CUPTI_CHECK(cuptiGetVersion(&version));
    REQUIRE(version == CUPTI_API_VERSION, "version %u", version);
    if (!late)
        CUPTI_CHECK(cuptiActivityRegisterTimestampCallback(fixed_clock));
    CUPTI_CHECK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
    CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
    CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));

    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    if (late)
        CUPTI_CHECK(cuptiActivityRegisterTimestampCallback(fixed_clock));
    CUPTI_CHECK(cuptiGetTimestamp(&now));
    REQUIRE(now == T0, "timestamp %llu", (unsigned long long)now);
    CHECK(cuModuleLoadData(&mod, MODULE_IMAGE));
    CHECK(cuModuleGetFunction(&vecadd, mod, "vecadd_f32"));
    CHECK(cuModuleGetFunction(&fill, mod, "fill_u32"));
    CHECK(cuModuleGetFunction(&empty, mod, "empty"));
    CHECK(cuStreamCreate(&s1, CU_STREAM_DEFAULT));
    CHECK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CHECK(cuMemAlloc(&a, sizeof ha));
    CHECK(cuMemAlloc(&b, sizeof hb));
    CHECK(cuMemAlloc(&c, sizeof hc));
    CHECK(cuMemAllocHost((void **)&pinned, sizeof ha));
    for (int i = 0; i < N; i++) {
        ha[i] = (float)i;
        pinned[i] = 2.0f * (float)i;
    }

    /* Copies and memsets of every kind, kernels on the legacy, a blocking, a non-blocking and
     * the per-thread default stream. */
    CHECK(cuMemcpyHtoD(a, ha, sizeof ha));                   /* pageable -> device, sync */
    CHECK(cuMemcpyHtoDAsync(b, pinned, sizeof hb, s1));      /* pinned -> device, async */
    CHECK(cuMemsetD32(c, 0, N));                             /* legacy stream */
    unsigned int n = N;
    void *vecadd_args[] = {&a, &b, &c, &n};
    CHECK(cuLaunchKernel(vecadd, 4, 1, 1, 256, 1, 1, 0, s1, vecadd_args, NULL));
    CHECK(cuMemcpyDtoHAsync(pinned, c, sizeof hc, s1));      /* device -> pinned, async */
    CHECK(cuStreamSynchronize(s1));
    for (int i = 0; i < N; i++)
        REQUIRE(pinned[i] == 3.0f * (float)i, "c[%d] = %f", i, pinned[i]);
    unsigned int value = 7;
    void *fill_args[] = {&c, &value, &n};
    CHECK(cuLaunchKernel(fill, 2, 1, 1, 512, 1, 1, 64, CU_STREAM_PER_THREAD, fill_args, NULL));
    CHECK(cuMemsetD8Async(b, 0x5a, sizeof hb, s2));
    CHECK(cuMemcpyDtoD(a, c, sizeof hc));                    /* legacy stream, waits for P */
    CHECK(cuMemcpyAsync((CUdeviceptr)ha, (CUdeviceptr)pinned, 256, s2)); /* pinned -> pageable */
    CHECK(cuMemcpyDtoH(hc, a, sizeof hc));                   /* device -> pageable, sync */
    for (int i = 0; i < N; i++)
        REQUIRE(hc[i] == 7, "hc[%d] = %u", i, hc[i]);
    CHECK(cuCtxSynchronize());
    CUPTI_CHECK(cuptiActivityFlushAll(0));

    /* Driver API and external-correlation records: one external id around one launch. */
    CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER));
    CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION));
    const CUpti_ExternalCorrelationKind custom0 = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
    CUPTI_CHECK(cuptiActivityPushExternalCorrelationId(custom0, 42));
    CHECK(cuLaunchKernel(empty, 1, 1, 1, 32, 1, 1, 0, s2, NULL, NULL));
    uint64_t last = 0;
    CUPTI_CHECK(cuptiActivityPopExternalCorrelationId(custom0, &last));
    REQUIRE(last == 42, "popped %llu", (unsigned long long)last);
    /* The kernel has not finished (virtual time): a plain flush keeps its buffer, a forced one
     * hands it over with the kernel's timestamps 0. */
    CUPTI_CHECK(cuptiActivityFlushAll(0));
    pthread_mutex_lock(&lock);
    REQUIRE(nbuffers == 2, "buffers %d", nbuffers);
    pthread_mutex_unlock(&lock);
    CUPTI_CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    CHECK(cuStreamSynchronize(s2));
    CUPTI_CHECK(cuptiActivityFlushAll(0));
    CUPTI_CHECK(cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped));

    printf("streams legacy=%u s1=%u s2=%u per_thread=%u\n", stream_id(ctx, NULL, 0),
           stream_id(NULL, s1, 0), stream_id(NULL, s2, 0), stream_id(ctx, NULL, 1));
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nlines; i++)
        printf("%s\n", lines[i]);
    pthread_mutex_unlock(&lock);

    CHECK(cuMemFreeHost(pinned));
    CHECK(cuMemFree(a));
    CHECK(cuMemFree(b));
    CHECK(cuMemFree(c));
    CHECK(cuStreamDestroy(s1));
    CHECK(cuStreamDestroy(s2));
    CHECK(cuModuleUnload(mod));
    CHECK(cuDevicePrimaryCtxRelease(dev));
    CUPTI_CHECK(cuptiFinalize());
    printf("cupti_client ok dropped=%zu calls=%ld\n", dropped, calls);
    return 0;
}
