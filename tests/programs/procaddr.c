/* procaddr: reaches the driver the way libcudart does. dlopen("libcuda.so.1"), one dlsym of
 * cuGetProcAddress_v2, then every other function through it (cudaVersion 13000, flags 0).
 * Also: flags 1 (legacy stream) and 2 (per-thread default stream: the _ptsz/_ptds variants),
 * the legacy cuGetProcAddress (v1), old ABIs (cuMemAlloc & co. at cudaVersion 2000: 32-bit
 * device pointers), the 13.0 ABI of cuCtxSynchronize (takes a context), and lookups that fail.
 * cuGetProcAddress calls count as driver calls. Prints one line:
 *   procaddr ok elapsed_ms=0.002000 calls=85 */
#include "common.h"

#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <string.h>

#define N 256

/* The pre-3.2 ABIs (cuda.h and cudaTypedefs.h declare these only for the driver's own build). */
typedef unsigned int devptr32; /* CUdeviceptr_v1 */
typedef CUresult(CUDAAPI *PFN_cuMemAlloc_v2000)(devptr32 *dptr, unsigned int bytesize);
typedef CUresult(CUDAAPI *PFN_cuMemFree_v2000)(devptr32 dptr);
typedef CUresult(CUDAAPI *PFN_cuMemcpyHtoD_v2000)(devptr32 dst, const void *src,
                                                   unsigned int bytes);
typedef CUresult(CUDAAPI *PFN_cuMemcpyDtoH_v2000)(void *dst, devptr32 src,
                                                   unsigned int bytes);

static PFN_cuGetProcAddress_v12000 gpa;

/* Looks `name` up and requires success. */
static void *get(const char *name, int version, cuuint64_t flags) {
    void *fn = NULL;
    CUdriverProcAddressQueryResult status = -1;
    CHECK(gpa(name, &fn, version, flags, &status));
    REQUIRE(status == CU_GET_PROC_ADDRESS_SUCCESS && fn != NULL, "%s: status=%d", name,
            (int)status);
    return fn;
}

int main(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    REQUIRE(lib != NULL, "dlopen: %s", dlerror());
    gpa = (PFN_cuGetProcAddress_v12000)dlsym(lib, "cuGetProcAddress_v2");
    REQUIRE(gpa != NULL, "dlsym: %s", dlerror());

    /* cudaVersion 13000, default flags (libcudart's usual lookups) */
    PFN_cuInit_v2000 pInit = get("cuInit", 13000, 0);
    PFN_cuDriverGetVersion_v2020 pDriverGetVersion = get("cuDriverGetVersion", 13000, 0);
    PFN_cuDeviceGet_v2000 pDeviceGet = get("cuDeviceGet", 13000, 0);
    PFN_cuDevicePrimaryCtxRetain_v7000 pRetain = get("cuDevicePrimaryCtxRetain", 13000, 0);
    PFN_cuDevicePrimaryCtxRelease_v11000 pRelease = get("cuDevicePrimaryCtxRelease", 13000, 0);
    PFN_cuCtxSetCurrent_v4000 pCtxSetCurrent = get("cuCtxSetCurrent", 13000, 0);
    PFN_cuCtxGetCurrent_v4000 pCtxGetCurrent = get("cuCtxGetCurrent", 13000, 0);
    PFN_cuCtxSynchronize_v13000 pCtxSynchronize = get("cuCtxSynchronize", 13000, 0);
    PFN_cuMemAlloc_v3020 pMemAlloc = get("cuMemAlloc", 13000, 0);
    PFN_cuMemFree_v3020 pMemFree = get("cuMemFree", 13000, 0);
    PFN_cuMemcpyHtoD_v3020 pMemcpyHtoD = get("cuMemcpyHtoD", 13000, 0);
    PFN_cuMemcpyDtoH_v3020 pMemcpyDtoH = get("cuMemcpyDtoH", 13000, 0);
    PFN_cuMemsetD8_v3020 pMemsetD8 = get("cuMemsetD8", 13000, 0);
    PFN_cuStreamCreate_v2000 pStreamCreate = get("cuStreamCreate", 13000, 0);
    PFN_cuStreamDestroy_v4000 pStreamDestroy = get("cuStreamDestroy", 13000, 0);
    PFN_cuStreamSynchronize_v2000 pStreamSynchronize = get("cuStreamSynchronize", 13000, 0);
    PFN_cuMemcpyAsync_v4000 pMemcpyAsync = get("cuMemcpyAsync", 13000, 0);
    PFN_cuModuleLoadData_v2000 pModuleLoadData = get("cuModuleLoadData", 13000, 0);
    PFN_cuModuleGetFunction_v2000 pModuleGetFunction = get("cuModuleGetFunction", 13000, 0);
    PFN_cuModuleUnload_v2000 pModuleUnload = get("cuModuleUnload", 13000, 0);
    PFN_cuLaunchKernel_v4000 pLaunchKernel = get("cuLaunchKernel", 13000, 0);
    PFN_cuEventCreate_v2000 pEventCreate = get("cuEventCreate", 13000, 0);
    PFN_cuEventRecord_v2000 pEventRecord = get("cuEventRecord", 13000, 0);
    PFN_cuEventSynchronize_v2000 pEventSynchronize = get("cuEventSynchronize", 13000, 0);
    PFN_cuEventElapsedTime_v12080 pEventElapsedTime = get("cuEventElapsedTime", 13000, 0);
    PFN_cuEventDestroy_v4000 pEventDestroy = get("cuEventDestroy", 13000, 0);
    PFN_cuGetErrorName_v6000 pGetErrorName = get("cuGetErrorName", 13000, 0);
    PFN_cuGetProcAddress_v12000 pGetProcAddress = get("cuGetProcAddress", 13000, 0);

    /* flags 1: legacy default stream variants */
    PFN_cuMemcpyAsync_v4000 pMemcpyAsyncLegacy = get("cuMemcpyAsync", 13000, 1);
    /* flags 2: per-thread default stream variants */
    PFN_cuMemcpyAsync_v7000_ptsz pMemcpyAsyncPtsz = get("cuMemcpyAsync", 13000, 2);
    PFN_cuLaunchKernel_v7000_ptsz pLaunchKernelPtsz = get("cuLaunchKernel", 13000, 2);
    PFN_cuStreamSynchronize_v7000_ptsz pStreamSynchronizePtsz =
        get("cuStreamSynchronize", 13000, 2);
    PFN_cuMemcpyHtoD_v7000_ptds pMemcpyHtoDPtds = get("cuMemcpyHtoD", 13000, 2);

    /* the legacy cuGetProcAddress (CUDA 11.3 ABI: no symbolStatus) */
    PFN_cuGetProcAddress_v11030 pGetProcAddressV1 = get("cuGetProcAddress", 11030, 0);

    /* old ABIs: 32-bit device pointers and unsigned int sizes */
    PFN_cuMemAlloc_v2000 pMemAllocV1 = get("cuMemAlloc", 2000, 0);
    PFN_cuMemFree_v2000 pMemFreeV1 = get("cuMemFree", 2000, 0);
    PFN_cuMemcpyHtoD_v2000 pMemcpyHtoDV1 = get("cuMemcpyHtoD", 2000, 0);
    PFN_cuMemcpyDtoH_v2000 pMemcpyDtoHV1 = get("cuMemcpyDtoH", 2000, 0);

    /* lookups that fail */
    void *fn = (void *)1;
    CUdriverProcAddressQueryResult status = -1;
    EXPECT(gpa("cuNoSuchFunction", &fn, 13000, 0, &status), CUDA_ERROR_NOT_FOUND);
    REQUIRE(fn == NULL && status == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, "status=%d", status);
    fn = (void *)1;
    EXPECT(gpa("cuStreamCreateWithPriority", &fn, 5000, 0, &status), CUDA_ERROR_NOT_FOUND);
    REQUIRE(fn == NULL && status == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, "status=%d",
            status);

    /* use them */
    int version = 0;
    CUdevice dev;
    CUcontext ctx, cur;
    CHECK(pInit(0));
    CHECK(pDriverGetVersion(&version));
    REQUIRE(version >= 13000, "version=%d", version);
    CHECK(pDeviceGet(&dev, 0));
    CHECK(pRetain(&ctx, dev));
    CHECK(pCtxSetCurrent(ctx));
    CHECK(pCtxGetCurrent(&cur));
    REQUIRE(cur == ctx, "current context");

    /* the lookups also work through the looked-up cuGetProcAddress and its v1 ABI */
    PFN_cuDriverGetVersion_v2020 viaSelf = NULL, viaV1 = NULL;
    CHECK(pGetProcAddress("cuDriverGetVersion", (void **)&viaSelf, 13000, 0, NULL));
    CHECK(pGetProcAddressV1("cuDriverGetVersion", (void **)&viaV1, 13000, 0));
    REQUIRE(viaSelf != NULL && viaV1 != NULL, "lookups");
    CHECK(viaSelf(&version));
    CHECK(viaV1(&version));

    CUmodule mod;
    CUfunction fill, add;
    CUstream stream;
    CUevent start, stop;
    CUdeviceptr buf;
    unsigned int host[N], n = N;
    CHECK(pModuleLoadData(&mod, MODULE_IMAGE));
    CHECK(pModuleGetFunction(&fill, mod, "fill_u32"));
    CHECK(pModuleGetFunction(&add, mod, "add_u32"));
    CHECK(pStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CHECK(pEventCreate(&start, CU_EVENT_DEFAULT));
    CHECK(pEventCreate(&stop, CU_EVENT_DEFAULT));
    CHECK(pMemAlloc(&buf, sizeof host));
    CHECK(pMemsetD8(buf, 0, sizeof host));

    /* buf[i] = 5 on `stream`, timed */
    unsigned int five = 5;
    void *fill_args[] = {&buf, &five, &n};
    CHECK(pEventRecord(start, stream));
    CHECK(pLaunchKernel(fill, 1, 1, 1, N, 1, 1, 0, stream, fill_args, NULL));
    CHECK(pEventRecord(stop, stream));
    CHECK(pEventSynchronize(stop));
    float ms = 0;
    CHECK(pEventElapsedTime(&ms, start, stop));
    CHECK(pMemcpyDtoH(host, buf, sizeof host));
    for (int i = 0; i < N; i++)
        REQUIRE(host[i] == 5, "host[%d]=%u", i, host[i]);

    /* per-thread default stream (stream 0 of the _ptsz variants): buf[i] += 2, read back */
    unsigned int two = 2;
    void *add_args[] = {&buf, &two, &n};
    CHECK(pLaunchKernelPtsz(add, 1, 1, 1, N, 1, 1, 0, NULL, add_args, NULL));
    CHECK(pMemcpyAsyncPtsz((CUdeviceptr)(uintptr_t)host, buf, sizeof host, NULL));
    CHECK(pStreamSynchronizePtsz(NULL));
    for (int i = 0; i < N; i++)
        REQUIRE(host[i] == 7, "host[%d]=%u", i, host[i]);

    /* _ptds synchronous copy, then a legacy-stream async copy back */
    for (int i = 0; i < N; i++)
        host[i] = (unsigned int)i;
    CHECK(pMemcpyHtoD(buf, host, sizeof host));
    CHECK(pMemcpyHtoDPtds(buf, host, sizeof host));
    memset(host, 0, sizeof host);
    CHECK(pMemcpyAsyncLegacy((CUdeviceptr)(uintptr_t)host, buf, sizeof host, NULL));
    CHECK(pStreamSynchronize(NULL));
    for (int i = 0; i < N; i++)
        REQUIRE(host[i] == (unsigned int)i, "host[%d]=%u", i, host[i]);
    CHECK(pMemcpyAsync((CUdeviceptr)(uintptr_t)host, buf, sizeof host, stream));
    CHECK(pStreamSynchronize(stream));

    /* the pre-3.2 ABI: a 32-bit allocation, copied through */
    devptr32 low = 0;
    CHECK(pMemAllocV1(&low, sizeof host));
    REQUIRE(low != 0, "32-bit allocation");
    CHECK(pMemcpyHtoDV1(low, host, (unsigned int)sizeof host));
    memset(host, 0, sizeof host);
    CHECK(pMemcpyDtoHV1(host, low, (unsigned int)sizeof host));
    for (int i = 0; i < N; i++)
        REQUIRE(host[i] == (unsigned int)i, "host[%d]=%u", i, host[i]);
    CHECK(pMemFreeV1(low));

    /* CUDA 13.0's cuCtxSynchronize takes the context */
    CHECK(pCtxSynchronize(ctx));
    const char *errname = NULL;
    CHECK(pGetErrorName(CUDA_ERROR_NOT_FOUND, &errname));
    REQUIRE(errname && strcmp(errname, "CUDA_ERROR_NOT_FOUND") == 0, "name=%s", errname);

    CHECK(pMemFree(buf));
    CHECK(pEventDestroy(start));
    CHECK(pEventDestroy(stop));
    CHECK(pStreamDestroy(stream));
    CHECK(pModuleUnload(mod));
    CHECK(pRelease(dev));

    printf("procaddr ok elapsed_ms=%.6f calls=%ld\n", ms, calls);
    return 0;
}
