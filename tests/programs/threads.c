/* threads: `threads [N [M]]` (defaults 4 and 1000). The main thread initialises and retains the
 * primary context; N threads each make it current, create a stream, make M cheap calls
 * (cuCtxGetCurrent and cuDriverGetVersion alternately: the lock-free pair of overhead
 * benchmarks), then a memset, a copy and a synchronisation on their own stream, and check the
 * data. Each thread makes M + 8 calls; the total is 4 + N * (M + 8). Prints one line:
 *   threads ok threads=4 per_thread=1000 calls=4036 */
#include "common.h"

#include <pthread.h>

#define WORDS 256

struct worker {
    pthread_t thread;
    unsigned int index;
    long cheap;
    CUcontext ctx;
    long calls;
};

static void *work(void *arg) {
    struct worker *w = arg;
    CUstream stream;
    CUdeviceptr buf;
    CUcontext cur;
    unsigned int host[WORDS];
    int version;

    CHECK(cuCtxSetCurrent(w->ctx));
    CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CHECK(cuMemAlloc(&buf, sizeof host));
    for (long i = 0; i < w->cheap; i++) {
        if (i % 2 == 0) {
            CHECK(cuCtxGetCurrent(&cur));
            REQUIRE(cur == w->ctx, "thread %u: current context", w->index);
        } else {
            CHECK(cuDriverGetVersion(&version));
        }
    }
    CHECK(cuMemsetD32Async(buf, w->index + 100, WORDS, stream));
    CHECK(cuMemcpyDtoHAsync(host, buf, sizeof host, stream));
    CHECK(cuStreamSynchronize(stream));
    for (int i = 0; i < WORDS; i++)
        REQUIRE(host[i] == w->index + 100, "thread %u: host[%d]=%u", w->index, i, host[i]);
    CHECK(cuMemFree(buf));
    CHECK(cuStreamDestroy(stream));
    w->calls = calls; /* this thread's own count (`calls` is thread-local) */
    return NULL;
}

int main(int argc, char **argv) {
    unsigned int n = argc > 1 ? (unsigned int)atoi(argv[1]) : 4;
    long m = argc > 2 ? atol(argv[2]) : 1000;
    REQUIRE(n >= 1 && n <= 1024 && m >= 0, "usage: threads [N [M]]");
    struct worker *workers = calloc(n, sizeof *workers);
    REQUIRE(workers != NULL, "calloc");
    CUdevice dev;
    CUcontext ctx;

    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    for (unsigned int i = 0; i < n; i++) {
        workers[i] = (struct worker){.index = i, .cheap = m, .ctx = ctx};
        REQUIRE(pthread_create(&workers[i].thread, NULL, work, &workers[i]) == 0, "thread");
    }
    for (unsigned int i = 0; i < n; i++)
        REQUIRE(pthread_join(workers[i].thread, NULL) == 0, "join");
    CHECK(cuDevicePrimaryCtxRelease(dev));
    long total = calls;
    for (unsigned int i = 0; i < n; i++)
        total += workers[i].calls;
    free(workers);

    printf("threads ok threads=%u per_thread=%ld calls=%ld\n", n, m, total);
    return 0;
}
