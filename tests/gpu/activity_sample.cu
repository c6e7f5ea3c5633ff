// activity_sample.cu — GPU work of every shape rtrace's GPU activity must record: kernels on the
// legacy default stream, on two streams fed by two host threads, and inside a CUDA graph;
// copies of every direction from pageable and pinned memory, synchronous and asynchronous, and
// a 2D copy; memsets synchronous and asynchronous. Prints what it issued, for
// tests/gpu/activity_check.py to compare with the trace:
//   activity_sample: launches=L graph_kernels=G graph_launches=1 copies=C memsets=M OK
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { std::fprintf(stderr, "activity_sample: %s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); std::exit(1); } } while (0)

__global__ void scale(float *x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}
__global__ void add_one(float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}

int main() {
    const int n = 1 << 16;
    const size_t bytes = n * sizeof(float);
    int launches = 0, copies = 0, memsets = 0;
    std::vector<float> host(n, 1.0f), back(n);
    float *pinned, *d0, *d1, *d2;
    CK(cudaMallocHost(&pinned, bytes));
    CK(cudaMalloc(&d0, bytes));
    CK(cudaMalloc(&d1, bytes));
    CK(cudaMalloc(&d2, bytes));
    for (int i = 0; i < n; i++) pinned[i] = 2.0f;

    // Legacy default stream: pageable HtoD, kernel, DtoD, memset, DtoH.
    CK(cudaMemcpy(d0, host.data(), bytes, cudaMemcpyHostToDevice)); copies++;
    scale<<<n / 256, 256>>>(d0, 3.0f, n); launches++;
    CK(cudaGetLastError());
    CK(cudaMemcpy(d1, d0, bytes, cudaMemcpyDeviceToDevice)); copies++;
    CK(cudaMemset(d2, 0, bytes)); memsets++;
    CK(cudaMemcpy(back.data(), d1, bytes, cudaMemcpyDeviceToHost)); copies++;
    if (back[7] != 3.0f) { std::fprintf(stderr, "activity_sample: got %f want 3\n", back[7]); return 1; }

    // Two host threads, each with its own stream: pinned async copies, memset, kernels.
    std::vector<std::thread> threads;
    float *dev[2] = {d1, d2};
    for (int t = 0; t < 2; t++) {
        threads.emplace_back([&, t] {
            cudaStream_t s;
            CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
            CK(cudaMemcpyAsync(dev[t], pinned, bytes, cudaMemcpyHostToDevice, s));
            CK(cudaMemsetAsync(dev[t], 0, 1024, s));
            for (int k = 0; k < 5; k++) add_one<<<n / 256, 256, 0, s>>>(dev[t], n);
            CK(cudaGetLastError());
            CK(cudaMemcpyAsync(pinned + t, dev[t], sizeof(float), cudaMemcpyDeviceToHost, s));
            CK(cudaStreamSynchronize(s));
            CK(cudaStreamDestroy(s));
        });
    }
    for (auto &th : threads) th.join();
    launches += 2 * 5;
    copies += 2 * 2;
    memsets += 2;

    // A 2D copy.
    CK(cudaMemcpy2D(d0, 1024, d1, 1024, 1024, 16, cudaMemcpyDeviceToDevice)); copies++;

    // A graph of three kernels, captured from a stream and launched once.
    cudaStream_t cs;
    CK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal));
    scale<<<n / 256, 256, 0, cs>>>(d0, 0.5f, n);
    add_one<<<n / 256, 256, 0, cs>>>(d0, n);
    scale<<<n / 256, 256, 0, cs>>>(d0, 2.0f, n);
    CK(cudaStreamEndCapture(cs, &graph));
    CK(cudaGraphInstantiate(&exec, graph, 0));
    CK(cudaGraphLaunch(exec, cs));
    CK(cudaStreamSynchronize(cs));
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(graph));
    CK(cudaStreamDestroy(cs));

    CK(cudaDeviceSynchronize());
    CK(cudaFree(d0));
    CK(cudaFree(d1));
    CK(cudaFree(d2));
    CK(cudaFreeHost(pinned));
    std::printf("activity_sample: launches=%d graph_kernels=3 graph_launches=1 copies=%d memsets=%d OK\n",
                launches, copies, memsets);
    return 0;
}
