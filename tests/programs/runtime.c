/* runtime: a program of the CUDA runtime (the simulated libcudart.so.13 of simcudart.c) that
 * also calls the driver directly. cudaFree(NULL) first (it initialises the runtime and the
 * driver; GPU activity starts inside it, so CUPTI never sees it enter), then the module from
 * the driver, then 15 runtime calls: cudaMalloc, cudaMemcpy (HtoD), cudaStreamCreate,
 * cudaLaunchKernel ×3 on the stream, cudaMemcpyAsync (DtoH), cudaStreamSynchronize, cudaMemset,
 * cudaLaunchKernel on the NULL stream, cudaDeviceSynchronize, cudaGetLastError,
 * cudaStreamDestroy, cudaFree, and a failing cudaMalloc (NULL pointer: cudaErrorInvalidValue,
 * no driver call). Prints `runtime ok value=V runtime_calls=16 driver_calls=2`. */
#include "common.h"

#include <cuda_runtime_api.h>
#include <string.h>

#define N 1024

#define RT(call, want)                                                                     \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        runtime_calls++;                                                                   \
        if (e_ != (want)) {                                                                \
            fprintf(stderr, "%s:%d: %s returned %d, expected %d\n", __FILE__, __LINE__,   \
                    #call, (int)e_, (int)(want));                                          \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

int main(void) {
    long runtime_calls = 0;
    static unsigned int host[N];
    unsigned int *dev = NULL;
    CUmodule mod;
    CUfunction fill;
    cudaStream_t s;
    RT(cudaFree(NULL), cudaSuccess);
    CHECK(cuModuleLoadData(&mod, MODULE_IMAGE));
    CHECK(cuModuleGetFunction(&fill, mod, "fill_u32"));
    RT(cudaMalloc((void **)&dev, sizeof host), cudaSuccess);
    memset(host, 0, sizeof host);
    RT(cudaMemcpy(dev, host, sizeof host, cudaMemcpyHostToDevice), cudaSuccess);
    RT(cudaStreamCreate(&s), cudaSuccess);
    unsigned int value = 7, n = N;
    void *args[] = {&dev, &value, &n};
    dim3 grid = {N / 256, 1, 1}, block = {256, 1, 1};
    for (int i = 0; i < 3; i++)
        RT(cudaLaunchKernel((const void *)fill, grid, block, args, 0, s), cudaSuccess);
    RT(cudaMemcpyAsync(host, dev, sizeof host, cudaMemcpyDeviceToHost, s), cudaSuccess);
    RT(cudaStreamSynchronize(s), cudaSuccess);
    RT(cudaMemset(dev, 0, sizeof host), cudaSuccess);
    RT(cudaLaunchKernel((const void *)fill, grid, block, args, 0, NULL), cudaSuccess);
    RT(cudaDeviceSynchronize(), cudaSuccess);
    RT(cudaGetLastError(), cudaSuccess);
    RT(cudaStreamDestroy(s), cudaSuccess);
    RT(cudaFree(dev), cudaSuccess);
    RT(cudaMalloc(NULL, 16), cudaErrorInvalidValue);
    printf("runtime ok value=%u runtime_calls=%ld driver_calls=%ld\n", host[N - 1],
           runtime_calls, calls);
    return 0;
}
