/* ranges: three ranges of kernels, each an NVTX range ("load", "step", "step") around a
 * cuProfilerStart..cuProfilerStop pair, with a kernel launched between them outside any range:
 *   range 1 "load": fill_u32, add_u32     (1200 ns of simulated GPU time)
 *   (outside: empty)
 *   range 2 "step": fill_u32 x3           (1500 ns)
 *   range 3 "step": empty                 (1000 ns)
 * For kernel profiling's application replay, which runs the program once per pass.
 *
 * ranges [MODE COUNTER_FILE]: COUNTER_FILE holds the number of earlier runs (none: 0); this run
 * is that number, writes it plus one back, and exits with status 10 + run. MODE `same` changes
 * nothing else; `extra-range` adds a fourth range "step" (one empty) in run 1; `extra-launch`
 * adds a fourth fill_u32 to range 2 in run 1. Without arguments: run 0, exit 0.
 * Prints `ranges ok run=R calls=N` (N = 28, one more with an extra launch, 4 more with an extra
 * range). */
#define _GNU_SOURCE
#include "common.h"

#include <nvtx3/nvToolsExt.h>
#include <string.h>

/* cudaProfiler.h's declarations (not in the runtime wheel's headers). */
CUresult CUDAAPI cuProfilerStart(void);
CUresult CUDAAPI cuProfilerStop(void);

#define N 1024

static CUfunction fill, add, empty;
static CUdeviceptr buf;

static void launch(CUfunction f) {
    unsigned int value = 1, n = N;
    void *args[] = {&buf, &value, &n};
    CHECK(cuLaunchKernel(f, N / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
}

static void range_begin(const char *name) {
    nvtxRangePushA(name);
    CHECK(cuProfilerStart());
}

static void range_end(void) {
    CHECK(cuCtxSynchronize());
    CHECK(cuProfilerStop());
    nvtxRangePop();
}

int main(int argc, char **argv) {
    const char *mode = argc > 2 ? argv[1] : "same";
    long run = 0;
    if (argc > 2) {
        FILE *f = fopen(argv[2], "r");
        if (f) {
            REQUIRE(fscanf(f, "%ld", &run) == 1, "%s: no count", argv[2]);
            fclose(f);
        }
        f = fopen(argv[2], "w");
        REQUIRE(f != NULL, "cannot write %s", argv[2]);
        fprintf(f, "%ld\n", run + 1);
        fclose(f);
    }
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuModuleLoadData(&mod, MODULE_IMAGE));
    CHECK(cuModuleGetFunction(&fill, mod, "fill_u32"));
    CHECK(cuModuleGetFunction(&add, mod, "add_u32"));
    CHECK(cuModuleGetFunction(&empty, mod, "empty"));
    CHECK(cuMemAlloc(&buf, N * sizeof(unsigned int)));

    range_begin("load");
    launch(fill);
    launch(add);
    range_end();

    launch(empty);

    range_begin("step");
    launch(fill);
    launch(fill);
    launch(fill);
    if (run == 1 && strcmp(mode, "extra-launch") == 0)
        launch(fill);
    range_end();

    range_begin("step");
    launch(empty);
    range_end();

    if (run == 1 && strcmp(mode, "extra-range") == 0) {
        range_begin("step");
        launch(empty);
        range_end();
    }

    CHECK(cuMemFree(buf));
    CHECK(cuModuleUnload(mod));
    CHECK(cuDevicePrimaryCtxRelease(dev));
    printf("ranges ok run=%ld calls=%ld\n", run, calls);
    return argc > 2 ? (int)(10 + run) : 0;
}
