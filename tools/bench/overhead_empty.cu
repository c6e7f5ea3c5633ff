// Workload (a) of tools/bench/gpu_overhead.sh: back-to-back empty kernels through the CUDA
// runtime API on a non-blocking stream. One warm-up round, then ROUNDS timed rounds of LAUNCHES
// launches; each round starts on an idle stream and ends with cudaStreamSynchronize, which the
// round's time includes.
//   nvcc -O2 -arch=sm_90 -cudart shared -o overhead_empty tools/bench/overhead_empty.cu
//   ./overhead_empty [LAUNCHES=20000] [ROUNDS=5]
// Prints, for gpu_overhead.sh:
//   round <us per launch>     one line per timed round
//   ops <launches>            kernel launches made in all, warm-up included
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>

__global__ void empty() {}

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { std::fprintf(stderr, "%s:%d %s -> %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); std::exit(1); } } while (0)

int main(int argc, char **argv) {
    int n = argc > 1 ? std::atoi(argv[1]) : 20000;
    int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
    if (n <= 0 || rounds <= 0) { std::fprintf(stderr, "usage: %s [launches] [rounds]\n", argv[0]); return 2; }
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    long launches = 0;
    for (int r = 0; r <= rounds; r++) {  // round 0: warm-up
        CK(cudaStreamSynchronize(s));
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < n; i++) empty<<<1, 1, 0, s>>>();
        CK(cudaStreamSynchronize(s));
        auto t1 = std::chrono::steady_clock::now();
        CK(cudaGetLastError());
        launches += n;
        if (r > 0) std::printf("round %.4f\n", std::chrono::duration<double, std::micro>(t1 - t0).count() / n);
    }
    CK(cudaStreamDestroy(s));
    std::printf("ops %ld\n", launches);
    return 0;
}
