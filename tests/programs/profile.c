/* profile: kernel launches for the kernel-profiling tests. On the primary context, three rounds
 * of fill_u32 (value 10*r), add_u32 (+1) and empty, then a check that the buffer holds 21; then
 * on a context of its own, fill_u32 twice (values 5 and 7) and a check that it holds 7. Eleven
 * launches in all, in this order: fill add empty fill add empty fill add empty | fill fill.
 * Prints one line. */
#include "common.h"

#define N 1024

static void launch(CUfunction f, CUdeviceptr buf, unsigned int value) {
    unsigned int n = N;
    void *args[] = {&buf, &value, &n};
    CHECK(cuLaunchKernel(f, N / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
}

static unsigned int check_all(CUdeviceptr buf, unsigned int want) {
    static unsigned int host[N];
    CHECK(cuMemcpyDtoH(host, buf, sizeof host));
    for (int i = 0; i < N; i++)
        REQUIRE(host[i] == want, "element %d is %u, expected %u", i, host[i], want);
    return host[0];
}

int main(void) {
    CUdevice dev;
    CUcontext primary, own;
    CUmodule mod, mod2;
    CUfunction fill, add, empty, fill2;
    CUdeviceptr buf, buf2;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&primary, dev));
    CHECK(cuCtxSetCurrent(primary));
    CHECK(cuModuleLoadData(&mod, MODULE_IMAGE));
    CHECK(cuModuleGetFunction(&fill, mod, "fill_u32"));
    CHECK(cuModuleGetFunction(&add, mod, "add_u32"));
    CHECK(cuModuleGetFunction(&empty, mod, "empty"));
    CHECK(cuMemAlloc(&buf, N * sizeof(unsigned int)));
    for (unsigned int r = 0; r < 3; r++) {
        launch(fill, buf, 10 * r);
        launch(add, buf, 1);
        CHECK(cuLaunchKernel(empty, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    }
    CHECK(cuCtxSynchronize());
    unsigned int first = check_all(buf, 21);

    CHECK(cuCtxCreate(&own, NULL, 0, dev));
    CHECK(cuModuleLoadData(&mod2, MODULE_IMAGE));
    CHECK(cuModuleGetFunction(&fill2, mod2, "fill_u32"));
    CHECK(cuMemAlloc(&buf2, N * sizeof(unsigned int)));
    launch(fill2, buf2, 5);
    launch(fill2, buf2, 7);
    CHECK(cuCtxSynchronize());
    unsigned int second = check_all(buf2, 7);
    CHECK(cuMemFree(buf2));
    CHECK(cuModuleUnload(mod2));
    CHECK(cuCtxDestroy(own));

    CHECK(cuCtxSetCurrent(primary));
    CHECK(cuMemFree(buf));
    CHECK(cuModuleUnload(mod));
    CHECK(cuDevicePrimaryCtxRelease(dev));
    printf("profile ok first=%u second=%u calls=%ld\n", first, second, calls);
    return 0;
}
