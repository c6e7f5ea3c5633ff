/* nvtx_threads: the pattern of a PyTorch training step, where the range's thread waits while
 * another thread launches its work. The main thread pushes external id (2, 42) and NVTX range
 * `step`, launches fill_u32 (the forward pass), pushes `backward`, and waits (pthread_join)
 * while an "autograd" thread with no range or id of its own launches `empty` three times; then
 * it waits while a "loader" thread with its own id (2, 7) and range `load` launches fill_u32
 * twice; then it pops `backward`, launches fill_u32 (the optimizer), pops `step` and the id.
 * The threads run one at a time. Prints `nvtx_threads ok calls=N` (N = 21). */
#define _GNU_SOURCE
#include "common.h"

#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdint.h>

static CUcontext ctx;
static CUdeviceptr buf;
static CUfunction fill, empty;
static int (*push)(uint32_t, uint64_t);
static int (*pop)(uint32_t, uint64_t *);

/* fill_u32 over the 4 KiB buffer. */
static void launch_fill(void) {
    unsigned int value = 7, n = 1024;
    void *args[] = {&buf, &value, &n};
    CHECK(cuLaunchKernel(fill, 4, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
}

static void launch_empty(void) {
    CHECK(cuLaunchKernel(empty, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
}

/* The autograd engine's thread: 4 calls, no range, no id. */
static void *autograd(void *arg) {
    (void)arg;
    CHECK(cuCtxSetCurrent(ctx));
    for (int i = 0; i < 3; i++)
        launch_empty();
    return (void *)calls;
}

/* A thread of its own: 3 calls inside its own id and range. */
static void *loader(void *arg) {
    (void)arg;
    if (push)
        push(2, 7);
    nvtxRangePushA("load");
    CHECK(cuCtxSetCurrent(ctx));
    launch_fill();
    launch_fill();
    nvtxRangePop();
    if (pop)
        pop(2, NULL);
    return (void *)calls;
}

/* Runs `f` on a thread of its own and waits for it; adds its calls to `total`. */
static void run_thread(void *(*f)(void *), long *total) {
    pthread_t t;
    void *n = NULL;
    REQUIRE(pthread_create(&t, NULL, f, NULL) == 0, "pthread_create");
    REQUIRE(pthread_join(t, &n) == 0, "pthread_join");
    *total += (long)n;
}

int main(void) {
    CUmodule mod;
    long others = 0;
    push = (int (*)(uint32_t, uint64_t))dlsym(RTLD_DEFAULT, "rtrace_push_external_correlation");
    pop = (int (*)(uint32_t, uint64_t *))dlsym(RTLD_DEFAULT, "rtrace_pop_external_correlation");
    buf = setup_context(); /* 6 calls */
    CHECK(cuCtxGetCurrent(&ctx));
    CHECK(cuModuleLoadData(&mod, MODULE_IMAGE));
    CHECK(cuModuleGetFunction(&fill, mod, "fill_u32"));
    CHECK(cuModuleGetFunction(&empty, mod, "empty"));

    if (push)
        push(2, 42);
    nvtxRangePushA("step");
    launch_fill();
    nvtxRangePushA("backward");
    run_thread(autograd, &others);
    run_thread(loader, &others);
    nvtxRangePop();
    launch_fill();
    nvtxRangePop();
    if (pop)
        pop(2, NULL);

    CHECK(cuCtxSynchronize());
    CHECK(cuModuleUnload(mod));
    printf("nvtx_threads ok calls=%ld\n", calls + others);
    return 0;
}
