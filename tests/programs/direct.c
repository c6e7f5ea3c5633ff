/* direct: the driver API through direct symbol binding (-lcuda).
 * init, device queries, primary context, module load, allocations, copies, memset, two kernel
 * launches with real effects, events, then teardown. Prints one line:
 *   direct ok driver=13000 sms=132 cc=9.0 elapsed_ms=0.003000 calls=44 */
#include "common.h"

#include <string.h>

#define N 1024

int main(void) {
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction vecadd, fill;
    CUstream stream;
    CUevent start, stop;
    CUdeviceptr a, b, c;
    unsigned int *pinned;
    int version, count, major, minor, sms, max_threads;
    size_t total;
    char name[128];
    float ha[N], hb[N], hc[N], ms;

    CHECK(cuInit(0));
    CHECK(cuDriverGetVersion(&version));
    CHECK(cuDeviceGetCount(&count));
    REQUIRE(count >= 1, "count=%d", count);
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDeviceGetName(name, sizeof name, dev));
    CHECK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
    CHECK(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
    CHECK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    CHECK(cuDeviceTotalMem(&total, dev));
    REQUIRE(total > 0, "total=%zu", total);
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));

    CHECK(cuModuleLoadData(&mod, MODULE_IMAGE));
    CHECK(cuModuleGetFunction(&vecadd, mod, "vecadd_f32"));
    CHECK(cuModuleGetFunction(&fill, mod, "fill_u32"));
    CHECK(cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, vecadd));
    REQUIRE(max_threads >= 256, "max_threads=%d", max_threads);
    CHECK(cuStreamCreate(&stream, CU_STREAM_DEFAULT));
    CHECK(cuEventCreate(&start, CU_EVENT_DEFAULT));
    CHECK(cuEventCreate(&stop, CU_EVENT_DEFAULT));

    for (int i = 0; i < N; i++) {
        ha[i] = (float)i;
        hb[i] = 2.0f * (float)i;
    }
    CHECK(cuMemAlloc(&a, sizeof ha));
    CHECK(cuMemAlloc(&b, sizeof hb));
    CHECK(cuMemAlloc(&c, sizeof hc));
    CHECK(cuMemAllocHost((void **)&pinned, N * sizeof *pinned));
    CHECK(cuMemcpyHtoD(a, ha, sizeof ha));
    CHECK(cuMemcpyHtoD(b, hb, sizeof hb));
    CHECK(cuMemsetD32(c, 0, N));

    /* c = a + b, timed with events on `stream` */
    unsigned int n = N;
    void *vecadd_args[] = {&a, &b, &c, &n};
    CHECK(cuEventRecord(start, stream));
    CHECK(cuLaunchKernel(vecadd, N / 256, 1, 1, 256, 1, 1, 0, stream, vecadd_args, NULL));
    CHECK(cuEventRecord(stop, stream));
    CHECK(cuEventSynchronize(stop));
    CHECK(cuEventElapsedTime(&ms, start, stop));
    /* a synchronous copy on the legacy default stream also waits for `stream` (blocking) */
    CHECK(cuMemcpyDtoH(hc, c, sizeof hc));
    for (int i = 0; i < N; i++)
        REQUIRE(hc[i] == 3.0f * (float)i, "hc[%d]=%f", i, hc[i]);

    /* c[i] = 7, read back asynchronously into page-locked memory */
    unsigned int value = 7;
    void *fill_args[] = {&c, &value, &n};
    CHECK(cuLaunchKernel(fill, N / 256, 1, 1, 256, 1, 1, 0, stream, fill_args, NULL));
    CHECK(cuMemcpyDtoHAsync(pinned, c, N * sizeof *pinned, stream));
    CHECK(cuStreamSynchronize(stream));
    for (int i = 0; i < N; i++)
        REQUIRE(pinned[i] == 7, "pinned[%d]=%u", i, pinned[i]);
    CHECK(cuCtxSynchronize());

    CHECK(cuMemFree(a));
    CHECK(cuMemFree(b));
    CHECK(cuMemFree(c));
    CHECK(cuMemFreeHost(pinned));
    CHECK(cuEventDestroy(start));
    CHECK(cuEventDestroy(stop));
    CHECK(cuStreamDestroy(stream));
    CHECK(cuModuleUnload(mod));
    CHECK(cuDevicePrimaryCtxRelease(dev));

    printf("direct ok driver=%d sms=%d cc=%d.%d elapsed_ms=%.6f calls=%ld\n", version, sms, major,
           minor, ms, calls);
    return 0;
}
