/* cupti_dump: a CUPTI activity client loaded by the driver (CUDA_INJECTION64_PATH), as a
 * profiler of the program's own would be. It gives CUPTI its own clock (the TSC, as the PyTorch
 * profiler does), records kernel, memcpy, peer-to-peer memcpy and memset records, and at exit
 * writes one line per record to $CUPTI_DUMP_OUTPUT:
 *   K <corr> <start> <end> <gx> <gy> <gz> <bx> <by> <bz> <graph> <name>
 *   C <corr> <start> <end> <bytes> <copyKind>
 *   P <corr> <start> <end> <bytes> <copyKind> <srcDevice> <dstDevice>
 *   S <corr> <start> <end> <bytes>
 * (times in TSC ticks). Under rtrace it is the program's CUPTI client that rtrace shares CUPTI
 * with; tests/gpu/cupti_match.py compares its records with rtrace's. */
#include <cupti.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <x86intrin.h>

#define BUF (8u << 20)
static FILE *out;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t CUPTIAPI tsc(void) { return __rdtsc(); }

static void CUPTIAPI requested(uint8_t **buf, size_t *size, size_t *max) {
    *buf = aligned_alloc(8, BUF);
    *size = *buf ? BUF : 0;
    *max = 0;
}

static void CUPTIAPI completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid) {
    (void)ctx; (void)stream; (void)size;
    CUpti_Activity *r = NULL;
    pthread_mutex_lock(&lock);
    while (out && cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
        if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
            CUpti_ActivityKernel10 *k = (CUpti_ActivityKernel10 *)r;
            fprintf(out, "K %u %llu %llu %d %d %d %d %d %d %u %s\n", k->correlationId,
                    (unsigned long long)k->start, (unsigned long long)k->end, k->gridX, k->gridY,
                    k->gridZ, k->blockX, k->blockY, k->blockZ, k->graphId, k->name);
        } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            CUpti_ActivityMemcpy6 *m = (CUpti_ActivityMemcpy6 *)r;
            fprintf(out, "C %u %llu %llu %llu %u\n", m->correlationId, (unsigned long long)m->start,
                    (unsigned long long)m->end, (unsigned long long)m->bytes, m->copyKind);
        } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY2) {
            CUpti_ActivityMemcpyPtoP4 *m = (CUpti_ActivityMemcpyPtoP4 *)r;
            fprintf(out, "P %u %llu %llu %llu %u %u %u\n", m->correlationId, (unsigned long long)m->start,
                    (unsigned long long)m->end, (unsigned long long)m->bytes, m->copyKind, m->srcDeviceId,
                    m->dstDeviceId);
        } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
            CUpti_ActivityMemset4 *m = (CUpti_ActivityMemset4 *)r;
            fprintf(out, "S %u %llu %llu %llu\n", m->correlationId, (unsigned long long)m->start,
                    (unsigned long long)m->end, (unsigned long long)m->bytes);
        }
    }
    pthread_mutex_unlock(&lock);
    free(buf);
}

static void at_exit(void) {
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    pthread_mutex_lock(&lock);
    if (out) fclose(out);
    out = NULL;
    pthread_mutex_unlock(&lock);
}

int InitializeInjection(void) {
    const char *path = getenv("CUPTI_DUMP_OUTPUT");
    out = fopen(path ? path : "cupti-dump.txt", "w");
    if (!out) return 0;
    if (cuptiActivityRegisterTimestampCallback(tsc) != CUPTI_SUCCESS ||
        cuptiActivityRegisterCallbacks(requested, completed) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY2) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET) != CUPTI_SUCCESS) {
        fprintf(stderr, "cupti_dump: CUPTI refused\n");
        return 0;
    }
    atexit(at_exit);
    return 1;
}
