/* errors: calls that fail, checking each result exactly, and that no driver call changes errno
 * (every call runs with errno = 1234 and must leave it so). Needs
 *   SIMCUDA_FAIL='cuMemAlloc_v2=2@2,cuLaunchKernel=719@*,cuCtxGetCurrent=201@3,cuStreamSynchronize=999@2+'
 * exactly (it exits with status 2 otherwise), so it can check injected failures too:
 * the 2nd cuMemAlloc_v2 gets CUDA_ERROR_OUT_OF_MEMORY, every cuLaunchKernel
 * CUDA_ERROR_LAUNCH_FAILED, the 3rd cuCtxGetCurrent CUDA_ERROR_INVALID_CONTEXT, and every
 * cuStreamSynchronize from the 2nd on CUDA_ERROR_UNKNOWN. Prints one line:
 *   errors ok failed=22 calls=43 */
#include <errno.h>
#include <string.h>

#include "common.h"

#define FAIL_SPEC                                                                \
    "cuMemAlloc_v2=2@2,cuLaunchKernel=719@*,cuCtxGetCurrent=201@3,"              \
    "cuStreamSynchronize=999@2+"

static long failed; /* calls that returned an error, as expected */

/* EXPECT, with errno set to 1234 before the call and checked after it. */
#define TRY(call, want)                                                          \
    do {                                                                         \
        errno = 1234;                                                            \
        EXPECT(call, want);                                                      \
        REQUIRE(errno == 1234, "%s changed errno to %d", #call, errno);          \
        if ((want) != CUDA_SUCCESS)                                              \
            failed++;                                                            \
    } while (0)

int main(void) {
    const char *spec = getenv("SIMCUDA_FAIL");
    if (!spec || strcmp(spec, FAIL_SPEC) != 0) {
        fprintf(stderr, "errors: run with SIMCUDA_FAIL='%s'\n", FAIL_SPEC);
        return 2;
    }
    CUdevice dev;
    CUcontext ctx, cur;
    CUmodule mod = NULL;
    CUfunction fill;
    CUstream stream;
    CUevent ev;
    CUdeviceptr p1, p2, p = 0xdead;
    const char *str;
    float ms;
    int count;
    unsigned int host[16] = {0};

    /* before cuInit, and cuInit's own argument check */
    TRY(cuDeviceGetCount(&count), CUDA_ERROR_NOT_INITIALIZED);
    TRY(cuInit(1), CUDA_ERROR_INVALID_VALUE);
    TRY(cuInit(0), CUDA_SUCCESS);
    TRY(cuDeviceGet(&dev, 99), CUDA_ERROR_INVALID_DEVICE);
    TRY(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    TRY(cuDevicePrimaryCtxRetain(&ctx, dev), CUDA_SUCCESS);
    /* no current context yet */
    TRY(cuMemAlloc(&p1, 64), CUDA_ERROR_INVALID_CONTEXT);
    TRY(cuCtxSetCurrent(ctx), CUDA_SUCCESS);

    /* cuCtxGetCurrent fails on its 3rd call only */
    TRY(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    TRY(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    cur = (CUcontext)0x1;
    TRY(cuCtxGetCurrent(&cur), CUDA_ERROR_INVALID_CONTEXT);
    REQUIRE(cur == (CUcontext)0x1, "an injected failure wrote its out-parameter");
    TRY(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    REQUIRE(cur == ctx, "current context");

    /* cuMemAlloc_v2: call 1 (above) failed for want of a context; call 2 is injected */
    TRY(cuMemAlloc(&p, 64), CUDA_ERROR_OUT_OF_MEMORY);
    REQUIRE(p == 0xdead, "an injected failure wrote its out-parameter");
    TRY(cuMemAlloc(&p, 0), CUDA_ERROR_INVALID_VALUE);
    TRY(cuMemAlloc(&p1, sizeof host), CUDA_SUCCESS);
    TRY(cuMemAlloc(&p2, sizeof host), CUDA_SUCCESS);
    TRY(cuMemcpyHtoD(p1 + 4096, host, sizeof host), CUDA_ERROR_INVALID_VALUE);
    TRY(cuMemcpyHtoD(p1 + 8, host, sizeof host), CUDA_ERROR_INVALID_VALUE); /* overruns */
    TRY(cuMemsetD32(p1 + 1, 0, 4), CUDA_ERROR_INVALID_VALUE);               /* misaligned */
    TRY(cuMemFree(12345), CUDA_ERROR_INVALID_VALUE);

    /* modules */
    TRY(cuModuleLoadData(&mod, "not a module"), CUDA_ERROR_INVALID_IMAGE);
    TRY(cuModuleLoadData(&mod, MODULE_IMAGE), CUDA_SUCCESS);
    TRY(cuModuleGetFunction(&fill, mod, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);
    TRY(cuModuleGetFunction(&fill, mod, "fill_u32"), CUDA_SUCCESS);
    /* every launch is injected, even one with an invalid block size */
    unsigned int n = 16, v = 1;
    void *args[] = {&p1, &v, &n};
    TRY(cuLaunchKernel(fill, 1, 1, 1, 16, 1, 1, 0, NULL, args, NULL), CUDA_ERROR_LAUNCH_FAILED);
    TRY(cuLaunchKernel(fill, 1, 1, 1, 2048, 1, 1, 0, NULL, args, NULL), CUDA_ERROR_LAUNCH_FAILED);

    /* streams and events */
    TRY(cuStreamCreate(&stream, 0x40), CUDA_ERROR_INVALID_VALUE);
    TRY(cuStreamCreate(&stream, CU_STREAM_DEFAULT), CUDA_SUCCESS);
    TRY(cuStreamSynchronize(stream), CUDA_SUCCESS);
    TRY(cuStreamSynchronize(stream), CUDA_ERROR_UNKNOWN);
    TRY(cuStreamSynchronize(stream), CUDA_ERROR_UNKNOWN);
    TRY(cuStreamDestroy(stream), CUDA_SUCCESS);
    TRY(cuStreamDestroy(stream), CUDA_ERROR_INVALID_HANDLE);
    TRY(cuEventCreate(&ev, CU_EVENT_DEFAULT), CUDA_SUCCESS);
    TRY(cuEventElapsedTime(&ms, ev, ev), CUDA_ERROR_INVALID_HANDLE); /* never recorded */
    TRY(cuEventDestroy(ev), CUDA_SUCCESS);

    /* error strings and the export table */
    str = (const char *)1;
    TRY(cuGetErrorString((CUresult)9999, &str), CUDA_ERROR_INVALID_VALUE);
    REQUIRE(str == NULL, "string of an unknown code");
    TRY(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &str), CUDA_SUCCESS);
    REQUIRE(strcmp(str, "CUDA_ERROR_OUT_OF_MEMORY") == 0, "name %s", str);
    const void *table;
    CUuuid id = {{0}};
    TRY(cuGetExportTable(&table, &id), CUDA_ERROR_NOT_SUPPORTED);

    TRY(cuMemFree(p1), CUDA_SUCCESS);
    TRY(cuMemFree(p2), CUDA_SUCCESS);
    TRY(cuModuleUnload(mod), CUDA_SUCCESS);
    TRY(cuDevicePrimaryCtxRelease(dev), CUDA_SUCCESS);

    printf("errors ok failed=%ld calls=%ld\n", failed, calls);
    return 0;
}
