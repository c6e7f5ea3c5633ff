/* Shared by the test programs: result checking, the driver-call counter, the module image.
 * Every driver call a program makes goes through CHECK or EXPECT, which count it in `calls`. */
#ifndef SIMCUDA_PROGRAMS_COMMON_H
#define SIMCUDA_PROGRAMS_COMMON_H

#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

/* Driver calls made by the calling thread (thread-local: programs with threads add them up). */
static __thread long calls __attribute__((unused));

/* Calls `call`, counts it, and exits with status 1 unless it returns `want`. */
#define EXPECT(call, want)                                                               \
    do {                                                                                 \
        CUresult rc_ = (call);                                                           \
        calls++;                                                                         \
        if (rc_ != (CUresult)(want)) {                                                   \
            fprintf(stderr, "%s:%d: %s returned %d, expected %d\n", __FILE__, __LINE__, \
                    #call, (int)rc_, (int)(want));                                       \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

#define CHECK(call) EXPECT(call, CUDA_SUCCESS)

/* Exits with status 1 and a message unless `cond` holds. */
#define REQUIRE(cond, ...)                                                      \
    do {                                                                        \
        if (!(cond)) {                                                          \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                       \
            fputc('\n', stderr);                                                \
            exit(1);                                                            \
        }                                                                       \
    } while (0)

/* A simcuda module image (format: tests/simcuda/README.md). fill_u32, add_u32 and vecadd_f32
 * are simcuda's built-in kernels, which really write memory; `empty` does nothing. */
static const char MODULE_IMAGE[] __attribute__((unused)) =
    "simcuda-module\n"
    "kernel vecadd_f32 2000\n"
    "kernel fill_u32 500\n"
    "kernel add_u32 700\n"
    "kernel empty 1000\n";

/* 6 calls: init, device 0, its primary context made current, a 4 KiB allocation set to 1s. */
static inline CUdeviceptr setup_context(void) {
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr buf;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuMemAlloc(&buf, 4096));
    CHECK(cuMemsetD8(buf, 1, 4096));
    return buf;
}

/* k cheap driver calls, alternating cuCtxGetCurrent and cuDriverGetVersion. */
static inline void cheap(long k) {
    CUcontext cur;
    int version;
    for (long i = 0; i < k; i++) {
        if (i % 2 == 0)
            CHECK(cuCtxGetCurrent(&cur));
        else
            CHECK(cuDriverGetVersion(&version));
    }
}

#endif
