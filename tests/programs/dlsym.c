/* dlsym: dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL), then every function by its exported
 * (versioned) name with dlsym on that handle; one more lookup with dlsym(RTLD_DEFAULT, ...),
 * which finds the driver because it was opened RTLD_GLOBAL. Not linked with -lcuda.
 * Prints one line:
 *   dlsym ok calls=41 */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include "common.h"

#include <cudaTypedefs.h>
#include <dlfcn.h>

#define N 512

static void *lib;

/* dlsym(lib, name), required to succeed. */
static void *sym(const char *name) {
    void *fn = dlsym(lib, name);
    REQUIRE(fn != NULL, "dlsym(%s): %s", name, dlerror());
    return fn;
}

int main(void) {
    lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    REQUIRE(lib != NULL, "dlopen: %s", dlerror());

    PFN_cuInit_v2000 pInit = sym("cuInit");
    PFN_cuDeviceGet_v2000 pDeviceGet = sym("cuDeviceGet");
    PFN_cuDeviceGetAttribute_v2000 pDeviceGetAttribute = sym("cuDeviceGetAttribute");
    PFN_cuCtxCreate_v12050 pCtxCreate = sym("cuCtxCreate_v4");
    PFN_cuCtxDestroy_v4000 pCtxDestroy = sym("cuCtxDestroy_v2");
    PFN_cuCtxPushCurrent_v4000 pCtxPushCurrent = sym("cuCtxPushCurrent_v2");
    PFN_cuCtxPopCurrent_v4000 pCtxPopCurrent = sym("cuCtxPopCurrent_v2");
    PFN_cuCtxGetCurrent_v4000 pCtxGetCurrent = sym("cuCtxGetCurrent");
    PFN_cuCtxSynchronize_v2000 pCtxSynchronize = sym("cuCtxSynchronize");
    PFN_cuMemAlloc_v3020 pMemAlloc = sym("cuMemAlloc_v2");
    PFN_cuMemFree_v3020 pMemFree = sym("cuMemFree_v2");
    PFN_cuMemcpyHtoDAsync_v3020 pMemcpyHtoDAsync = sym("cuMemcpyHtoDAsync_v2");
    PFN_cuMemcpyDtoHAsync_v3020 pMemcpyDtoHAsync = sym("cuMemcpyDtoHAsync_v2");
    PFN_cuMemcpyDtoD_v3020 pMemcpyDtoD = sym("cuMemcpyDtoD_v2");
    PFN_cuMemsetD32Async_v3020 pMemsetD32Async = sym("cuMemsetD32Async");
    PFN_cuMemsetD8Async_v7000_ptsz pMemsetD8AsyncPtsz = sym("cuMemsetD8Async_ptsz");
    PFN_cuStreamCreateWithPriority_v5050 pStreamCreateWithPriority =
        sym("cuStreamCreateWithPriority");
    PFN_cuStreamWaitEvent_v3020 pStreamWaitEvent = sym("cuStreamWaitEvent");
    PFN_cuStreamQuery_v2000 pStreamQuery = sym("cuStreamQuery");
    PFN_cuStreamSynchronize_v2000 pStreamSynchronize = sym("cuStreamSynchronize");
    PFN_cuStreamSynchronize_v7000_ptsz pStreamSynchronizePtsz = sym("cuStreamSynchronize_ptsz");
    PFN_cuStreamDestroy_v4000 pStreamDestroy = sym("cuStreamDestroy_v2");
    PFN_cuEventCreate_v2000 pEventCreate = sym("cuEventCreate");
    PFN_cuEventRecord_v2000 pEventRecord = sym("cuEventRecord");
    PFN_cuEventRecord_v7000_ptsz pEventRecordPtsz = sym("cuEventRecord_ptsz");
    PFN_cuEventQuery_v2000 pEventQuery = sym("cuEventQuery");
    PFN_cuEventDestroy_v4000 pEventDestroy = sym("cuEventDestroy_v2");
    PFN_cuModuleLoadData_v2000 pModuleLoadData = sym("cuModuleLoadData");
    PFN_cuModuleGetFunction_v2000 pModuleGetFunction = sym("cuModuleGetFunction");
    PFN_cuModuleUnload_v2000 pModuleUnload = sym("cuModuleUnload");
    PFN_cuLaunchKernel_v4000 pLaunchKernel = sym("cuLaunchKernel");
    PFN_cuGetErrorString_v6000 pGetErrorString = sym("cuGetErrorString");
    PFN_cuGetExportTable_v3000 pGetExportTable = sym("cuGetExportTable");

    /* found through the global scope, as a library that does not know the handle would */
    PFN_cuDriverGetVersion_v2020 pDriverGetVersion = dlsym(RTLD_DEFAULT, "cuDriverGetVersion");
    REQUIRE(pDriverGetVersion != NULL, "dlsym(RTLD_DEFAULT): %s", dlerror());

    int version = 0, warp = 0;
    CUdevice dev;
    CUcontext ctx, cur, popped;
    CHECK(pDriverGetVersion(&version));
    CHECK(pInit(0));
    CHECK(pDeviceGet(&dev, 0));
    CHECK(pDeviceGetAttribute(&warp, CU_DEVICE_ATTRIBUTE_WARP_SIZE, dev));
    REQUIRE(warp == 32, "warp=%d", warp);
    /* a non-primary context: created current, popped, pushed back */
    CHECK(pCtxCreate(&ctx, NULL, 0, dev));
    CHECK(pCtxPopCurrent(&popped));
    REQUIRE(popped == ctx, "popped");
    CHECK(pCtxGetCurrent(&cur));
    REQUIRE(cur == NULL, "no current context after pop");
    CHECK(pCtxPushCurrent(ctx));
    CHECK(pCtxGetCurrent(&cur));
    REQUIRE(cur == ctx, "current context after push");

    CUmodule mod;
    CUfunction fill, empty;
    CUstream s1, s2;
    CUevent ev;
    CUdeviceptr a, b;
    unsigned int host[N], n = N, nine = 9;
    CHECK(pModuleLoadData(&mod, MODULE_IMAGE));
    CHECK(pModuleGetFunction(&fill, mod, "fill_u32"));
    CHECK(pModuleGetFunction(&empty, mod, "empty"));
    CHECK(pStreamCreateWithPriority(&s1, CU_STREAM_NON_BLOCKING, -1));
    CHECK(pStreamCreateWithPriority(&s2, CU_STREAM_DEFAULT, 0));
    CHECK(pEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    CHECK(pMemAlloc(&a, sizeof host));
    CHECK(pMemAlloc(&b, sizeof host));

    /* s1 (non-blocking): a[i] = 9; s2 (blocking) waits for it; the synchronous copy a -> b on
     * the legacy stream waits for s2, and s2's read-back waits for the legacy stream */
    void *fill_args[] = {&a, &nine, &n};
    CHECK(pMemsetD32Async(a, 0, N, s1));
    CHECK(pLaunchKernel(fill, 2, 1, 1, N / 2, 1, 1, 0, s1, fill_args, NULL));
    CHECK(pEventRecord(ev, s1));
    CHECK(pStreamWaitEvent(s2, ev, 0));
    CHECK(pMemcpyDtoD(b, a, sizeof host));
    CHECK(pMemcpyDtoHAsync(host, b, sizeof host, s2));
    CHECK(pStreamSynchronize(s2));
    EXPECT(pStreamQuery(s2), CUDA_SUCCESS);
    for (int i = 0; i < N; i++)
        REQUIRE(host[i] == 9, "host[%d]=%u", i, host[i]);

    /* the per-thread default stream, through _ptsz names */
    CHECK(pMemcpyHtoDAsync(a, host, sizeof host, s1));
    CHECK(pMemsetD8AsyncPtsz(b, 0, sizeof host, NULL));
    CHECK(pLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, CU_STREAM_PER_THREAD, NULL, NULL));
    CHECK(pEventRecordPtsz(ev, NULL));
    CHECK(pStreamSynchronizePtsz(NULL));
    CHECK(pEventQuery(ev));
    CHECK(pCtxSynchronize());

    const char *msg = NULL;
    const void *table = (const void *)1;
    CUuuid id = {{0}};
    CHECK(pGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &msg));
    REQUIRE(msg != NULL, "message");
    EXPECT(pGetExportTable(&table, &id), CUDA_ERROR_NOT_SUPPORTED);
    REQUIRE(table == NULL, "export table");

    CHECK(pMemFree(a));
    CHECK(pMemFree(b));
    CHECK(pEventDestroy(ev));
    CHECK(pStreamDestroy(s1));
    CHECK(pStreamDestroy(s2));
    CHECK(pModuleUnload(mod));
    CHECK(pCtxDestroy(ctx));

    printf("dlsym ok calls=%ld\n", calls);
    return 0;
}
