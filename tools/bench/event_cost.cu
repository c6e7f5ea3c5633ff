// What timing GPU work with CUDA events costs the host, per launch, on a launch-bound loop of
// empty kernels: the alternatives for rtrace's GPU timestamps, side by side in one process.
//   nvcc -O2 -o event_cost tools/bench/event_cost.cu -lcuda && ./event_cost [launches] [reps]
// Modes (each timed `reps` times, alternating; median reported):
//   plain        cudaLaunchKernel only
//   ctx+capture  + cuCtxGetCurrent + cuStreamIsCapturing (what every timed launch must check)
//   end-event    + one cuEventRecord after the launch
//   two-events   + cuEventRecord before and after the launch
#include <cuda.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

__global__ void empty() {}

#define CK(x) do { auto e_ = (x); if (e_ != 0) { std::fprintf(stderr, "%s:%d %s -> %d\n", __FILE__, __LINE__, #x, (int)e_); std::exit(1); } } while (0)

int main(int argc, char **argv) {
    int n = argc > 1 ? std::atoi(argv[1]) : 20000;
    int reps = argc > 2 ? std::atoi(argv[2]) : 7;
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    std::vector<CUevent> ev(2 * n);
    for (auto &e : ev) CK(cuEventCreate(&e, CU_EVENT_DEFAULT));
    const char *names[] = {"plain", "ctx+capture", "end-event", "two-events"};
    std::vector<double> host[4], total[4];
    for (int w = 0; w < 2; w++) { empty<<<1, 1, 0, s>>>(); }
    CK(cudaStreamSynchronize(s));
    for (int r = 0; r < reps; r++) {
        for (int m = 0; m < 4; m++) {
            auto t0 = std::chrono::steady_clock::now();
            for (int i = 0; i < n; i++) {
                if (m >= 1) {
                    CUcontext c; CUstreamCaptureStatus st;
                    CK(cuCtxGetCurrent(&c));
                    CK(cuStreamIsCapturing((CUstream)s, &st));
                }
                if (m == 3) CK(cuEventRecord(ev[2 * i], (CUstream)s));
                empty<<<1, 1, 0, s>>>();
                if (m >= 2) CK(cuEventRecord(ev[2 * i + 1], (CUstream)s));
            }
            auto t1 = std::chrono::steady_clock::now();
            CK(cudaStreamSynchronize(s));
            auto t2 = std::chrono::steady_clock::now();
            host[m].push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / n);
            total[m].push_back(std::chrono::duration<double, std::micro>(t2 - t0).count() / n);
        }
    }
    auto med = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
    std::printf("%-12s %16s %18s %16s\n", "mode", "host us/launch", "added vs plain", "total us/launch");
    for (int m = 0; m < 4; m++)
        std::printf("%-12s %16.3f %18.3f %16.3f\n", names[m], med(host[m]), med(host[m]) - med(host[0]), med(total[m]));
    return 0;
}
