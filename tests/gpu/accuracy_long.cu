// accuracy_long SECONDS: GPU work for SECONDS seconds, for comparing rtrace's GPU times with a
// CUPTI client's from the same run over a long time (tests/gpu/run_long.sh): every 5 ms a
// ~50 us spinning kernel on one stream and a 64 KiB host-to-device copy on another.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

__global__ void spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 10;
    cudaStream_t a, b;
    void *dev, *host;
    cudaStreamCreate(&a);
    cudaStreamCreate(&b);
    cudaMalloc(&dev, 1 << 16);
    cudaMallocHost(&host, 1 << 16);
    long n = 0;
    double end = now() + seconds;
    while (now() < end) {
        spin<<<1, 32, 0, a>>>(100000);
        cudaMemcpyAsync(dev, host, 1 << 16, cudaMemcpyHostToDevice, b);
        n++;
        usleep(5000);
    }
    cudaDeviceSynchronize();
    printf("accuracy_long launches %ld\n", n);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
