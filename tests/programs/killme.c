/* killme: sets up (5 calls), then makes driver calls in a loop forever, printing `ready` once
 * (flushed) after its first 1000 calls, so a test can SIGKILL it mid-stream. Each loop round is
 * cuCtxGetCurrent + cuDriverGetVersion, plus a memset and a context synchronisation every 64th
 * round. As a safety net against a test that never kills it, it exits with status 5 after
 * `killme [SECONDS]` (default 120) of wall time. */
#include "common.h"

#include <time.h>

int main(int argc, char **argv) {
    long limit = argc > 1 ? atol(argv[1]) : 120;
    time_t deadline = time(NULL) + limit;
    CUdevice dev;
    CUcontext ctx, cur;
    CUdeviceptr buf;
    int version, ready = 0;

    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuMemAlloc(&buf, 4096));
    for (unsigned long round = 0;; round++) {
        CHECK(cuCtxGetCurrent(&cur));
        CHECK(cuDriverGetVersion(&version));
        if (round % 64 == 63) {
            CHECK(cuMemsetD32(buf, (unsigned int)round, 1024));
            CHECK(cuCtxSynchronize());
        }
        if (!ready && calls >= 1000) {
            printf("ready\n");
            fflush(stdout);
            ready = 1;
        }
        if (round % 4096 == 0 && time(NULL) > deadline) {
            fprintf(stderr, "killme: not killed within %ld s\n", limit);
            return 5;
        }
    }
}
