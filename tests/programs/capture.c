/* capture [SLEEP_MS [edges]]: four steps, each an NVTX range "step N" holding a memset, a
 * kernel launch and a context synchronize; cuProfilerStart/cuProfilerStop around step 1; a
 * pause of SLEEP_MS (default 0) before step 3. With "edges", then NVTX ranges that straddle a
 * capture range's edges (edges() says which). For the capture-control tests. Prints one
 * line. */
#define _GNU_SOURCE
#include "common.h"

#include <nvtx3/nvToolsExt.h>
#include <string.h>
#include <unistd.h>

/* cudaProfiler.h's declarations (not in the runtime wheel's headers). */
CUresult CUDAAPI cuProfilerStart(void);
CUresult CUDAAPI cuProfilerStop(void);

#define N 1024

static CUfunction fill;
static CUdeviceptr buf;

static void step(int i) {
    char name[16];
    snprintf(name, sizeof name, "step %d", i);
    nvtxRangePushA(name);
    unsigned int value = (unsigned int)i, n = N;
    void *args[] = {&buf, &value, &n};
    CHECK(cuMemsetD32(buf, 0, N));
    CHECK(cuLaunchKernel(fill, N / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
    CHECK(cuCtxSynchronize());
    nvtxRangePop();
}

/* Ranges begun inside a cuProfilerStart..Stop range and ended outside it, and the other way
 * round, with one launch (and a synchronize) inside "outer" only. */
static void edges(void) {
    unsigned int value = 9, n = N;
    void *args[] = {&buf, &value, &n};
    CHECK(cuProfilerStart());
    nvtxRangePushA("outer");
    nvtxRangePushA("inner");
    nvtxRangeId_t a = nvtxRangeStartA("async");
    CHECK(cuProfilerStop());
    nvtxRangePop(); /* inner */
    nvtxRangeEnd(a);
    nvtxRangePushA("hidden");
    nvtxRangeId_t b = nvtxRangeStartA("hidden async");
    CHECK(cuProfilerStart());
    nvtxRangePop(); /* hidden */
    nvtxRangeEnd(b);
    CHECK(cuLaunchKernel(fill, N / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
    CHECK(cuCtxSynchronize());
    nvtxRangePop(); /* outer */
    CHECK(cuProfilerStop());
}

int main(int argc, char **argv) {
    int sleep_ms = argc > 1 ? atoi(argv[1]) : 0;
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuModuleLoadData(&mod, MODULE_IMAGE));
    CHECK(cuModuleGetFunction(&fill, mod, "fill_u32"));
    CHECK(cuMemAlloc(&buf, N * sizeof(unsigned int)));
    step(0);
    CHECK(cuProfilerStart());
    step(1);
    CHECK(cuProfilerStop());
    step(2);
    usleep((useconds_t)sleep_ms * 1000);
    step(3);
    if (argc > 2 && strcmp(argv[2], "edges") == 0)
        edges();
    CHECK(cuMemFree(buf));
    CHECK(cuModuleUnload(mod));
    CHECK(cuDevicePrimaryCtxRelease(dev));
    printf("capture ok calls=%ld\n", calls);
    return 0;
}
