/* profile_self: a program that profiles with CUPTI's range profiler itself, after a kernel
 * launch rtrace's kernel profiling may already have profiled. It launches fill_u32 once, then
 * calls cuptiProfilerInitialize and cuptiRangeProfilerEnable on its context (which must
 * succeed: the counters are the program's), disables it, launches again and checks the buffer.
 * Prints one line. */
#include "common.h"

#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>

#define N 1024

static void fill(CUfunction f, CUdeviceptr buf, unsigned int value) {
    unsigned int n = N;
    void *args[] = {&buf, &value, &n};
    CHECK(cuLaunchKernel(f, N / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
    CHECK(cuCtxSynchronize());
}

int main(void) {
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction f;
    CUdeviceptr buf;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuModuleLoadData(&mod, MODULE_IMAGE));
    CHECK(cuModuleGetFunction(&f, mod, "fill_u32"));
    CHECK(cuMemAlloc(&buf, N * sizeof(unsigned int)));
    fill(f, buf, 3);

    CUpti_Profiler_Initialize_Params init = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE, NULL};
    CUptiResult initialized = cuptiProfilerInitialize(&init);
    CUpti_RangeProfiler_Enable_Params en = {CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE};
    en.ctx = ctx;
    CUptiResult enabled = cuptiRangeProfilerEnable(&en);
    REQUIRE(initialized == CUPTI_SUCCESS && enabled == CUPTI_SUCCESS,
            "cuptiProfilerInitialize %d, cuptiRangeProfilerEnable %d", initialized, enabled);
    CUpti_RangeProfiler_Disable_Params dis = {CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE};
    dis.pRangeProfilerObject = en.pRangeProfilerObject;
    REQUIRE(cuptiRangeProfilerDisable(&dis) == CUPTI_SUCCESS, "cuptiRangeProfilerDisable");

    fill(f, buf, 9);
    unsigned int host[N];
    CHECK(cuMemcpyDtoH(host, buf, sizeof host));
    REQUIRE(host[0] == 9 && host[N - 1] == 9, "buffer holds %u", host[0]);
    CHECK(cuMemFree(buf));
    CHECK(cuModuleUnload(mod));
    CHECK(cuDevicePrimaryCtxRelease(dev));
    printf("profile_self ok enable=%d\n", (int)enabled);
    return 0;
}
