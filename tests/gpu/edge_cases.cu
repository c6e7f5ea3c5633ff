// Launch routes and memory kinds the other GPU programs do not use, in one CUDA C++ program
// (tests/gpu/run.sh, step `edge`: run through `with_client`, so its output and exit status must
// be the same traced, its API counts CUPTI's, and its kernels, copies and memsets the injected
// client's one to one):
//   - cudaLaunchKernel on the legacy, a non-blocking and the per-thread default stream;
//   - cudaLaunchKernelEx with a thread-block cluster (sm_90), and cudaLaunchCooperativeKernel;
//   - managed memory (cudaMallocManaged, cudaMemPrefetchAsync both ways, read on the host);
//   - stream-ordered memory (cudaMallocAsync, cudaMemsetAsync, cudaFreeAsync) and pinned copies;
//   - a stream captured into a graph (kernel, memset, copy), instantiated and launched three
//     times, and a graph built node by node (a kernel node and a host node);
//   - cudaLaunchHostFunc and events;
//   - a launch with an invalid configuration (its error kept and printed);
//   - the driver API: a context of its own (cuCtxCreate), cuMemAlloc, cuMemsetD32, cuMemcpyDtoH,
//     cuCtxDestroy.
// Prints what it computed (no times), then `edge_cases: OK`, and exits 0.
//
//   nvcc -O2 -gencode arch=compute_90,code=sm_90 -o edge_cases tests/gpu/edge_cases.cu -lcuda
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#ifdef __CUDACC__
__global__ void add(float *a, int n, float v) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] += v;
}
__global__ void scale(float *a, int n, float v) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] *= v;
}
#else
// Host-only syntax check (g++ -fsyntax-only -x c++): the kernels' signatures.
void add(float *, int, float) {}
void scale(float *, int, float) {}
#endif

static int failures = 0;

#define CK(x)                                                                          \
    do {                                                                               \
        cudaError_t e_ = (x);                                                          \
        if (e_ != cudaSuccess) {                                                       \
            printf("%s: %s\n", #x, cudaGetErrorName(e_));                              \
            failures++;                                                                \
        }                                                                              \
    } while (0)
#define CU(x)                                                                          \
    do {                                                                               \
        CUresult r_ = (x);                                                             \
        if (r_ != CUDA_SUCCESS) {                                                      \
            const char *name_ = "?";                                                   \
            cuGetErrorName(r_, &name_);                                                \
            printf("%s: %s\n", #x, name_);                                             \
            failures++;                                                                \
        }                                                                              \
    } while (0)

static const int N = 1 << 16;
static const int BLOCK = 256;

// A launch of `k` over N elements of `a` with value `v` on `stream`, by cudaLaunchKernel.
static void launch(void (*k)(float *, int, float), float *a, float v, cudaStream_t stream) {
    int n = N;
    void *args[] = {&a, &n, &v};
    CK(cudaLaunchKernel((const void *)k, dim3(N / BLOCK), dim3(BLOCK), args, 0, stream));
}

static double sum(const float *h, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += h[i];
    return s;
}

static void CUDART_CB host_note(void *p) { (*(int *)p)++; }

int main() {
    float *d = nullptr;
    std::vector<float> h(N);
    CK(cudaMalloc(&d, N * sizeof(float)));
    CK(cudaMemset(d, 0, N * sizeof(float)));

    // Three default streams' worth of plain launches.
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    launch(add, d, 1.0f, 0);
    CK(cudaDeviceSynchronize());
    launch(add, d, 2.0f, s);
    CK(cudaStreamSynchronize(s));
    launch(add, d, 3.0f, cudaStreamPerThread);
    CK(cudaStreamSynchronize(cudaStreamPerThread));
    CK(cudaMemcpy(h.data(), d, N * sizeof(float), cudaMemcpyDeviceToHost));
    printf("streams: %.0f\n", sum(h.data(), N));

    // A cluster launch (two blocks a cluster) and a cooperative one.
    {
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(N / BLOCK);
        cfg.blockDim = dim3(BLOCK);
        cfg.stream = s;
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeClusterDimension;
        attr[0].val.clusterDim.x = 2;
        attr[0].val.clusterDim.y = 1;
        attr[0].val.clusterDim.z = 1;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
        int n = N;
        float v = 2.0f;
        void *args[] = {&d, &n, &v};
        CK(cudaLaunchKernelExC(&cfg, (const void *)scale, args));
        CK(cudaStreamSynchronize(s));
        int coop = 0;
        CK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, 0));
        v = 0.5f;
        if (coop) CK(cudaLaunchCooperativeKernel((const void *)scale, dim3(32), dim3(BLOCK), args, 0, s));
        else launch(scale, d, 0.5f, s);
        CK(cudaStreamSynchronize(s));
        CK(cudaMemcpy(h.data(), d, N * sizeof(float), cudaMemcpyDeviceToHost));
        printf("cluster and cooperative: %.0f\n", sum(h.data(), N));
    }

    // Managed memory, prefetched to the device and back.
    {
        float *m = nullptr;
        CK(cudaMallocManaged(&m, N * sizeof(float)));
        for (int i = 0; i < N; i++) m[i] = 1.0f;
        cudaMemLocation dev = {};
        dev.type = cudaMemLocationTypeDevice;
        dev.id = 0;
        cudaMemLocation host = {};
        host.type = cudaMemLocationTypeHost;
        CK(cudaMemPrefetchAsync(m, N * sizeof(float), dev, 0, s));
        launch(add, m, 4.0f, s);
        CK(cudaMemPrefetchAsync(m, N * sizeof(float), host, 0, s));
        CK(cudaStreamSynchronize(s));
        printf("managed: %.0f\n", sum(m, N));
        CK(cudaFree(m));
    }

    // Stream-ordered allocation, memset and pinned copies.
    {
        float *a = nullptr, *pinned = nullptr;
        CK(cudaMallocHost(&pinned, N * sizeof(float)));
        for (int i = 0; i < N; i++) pinned[i] = 2.0f;
        CK(cudaMallocAsync(&a, N * sizeof(float), s));
        CK(cudaMemsetAsync(a, 0, N * sizeof(float), s));
        CK(cudaMemcpyAsync(a, pinned, N * sizeof(float), cudaMemcpyHostToDevice, s));
        launch(scale, a, 3.0f, s);
        CK(cudaMemcpyAsync(pinned, a, N * sizeof(float), cudaMemcpyDeviceToHost, s));
        CK(cudaFreeAsync(a, s));
        CK(cudaStreamSynchronize(s));
        printf("stream-ordered: %.0f\n", sum(pinned, N));
        CK(cudaFreeHost(pinned));
    }

    // A captured graph launched three times, and one built node by node with a host node.
    {
        cudaGraph_t g;
        cudaGraphExec_t ge;
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        CK(cudaMemsetAsync(d, 0, N * sizeof(float), s));
        launch(add, d, 1.0f, s);
        CK(cudaMemcpyAsync(h.data(), d, 1024 * sizeof(float), cudaMemcpyDeviceToHost, s));
        CK(cudaStreamEndCapture(s, &g));
        CK(cudaGraphInstantiate(&ge, g, 0));
        for (int i = 0; i < 3; i++) CK(cudaGraphLaunch(ge, s));
        CK(cudaStreamSynchronize(s));
        printf("captured graph: %.0f\n", sum(h.data(), 1024));
        CK(cudaGraphExecDestroy(ge));
        CK(cudaGraphDestroy(g));

        int notes = 0;
        cudaGraph_t b;
        CK(cudaGraphCreate(&b, 0));
        cudaKernelNodeParams kp = {};
        int n = N;
        float v = 5.0f;
        void *args[] = {&d, &n, &v};
        kp.func = (void *)add;
        kp.gridDim = dim3(N / BLOCK);
        kp.blockDim = dim3(BLOCK);
        kp.kernelParams = args;
        cudaGraphNode_t kn, hn;
        CK(cudaGraphAddKernelNode(&kn, b, nullptr, 0, &kp));
        cudaHostNodeParams hp = {};
        hp.fn = host_note;
        hp.userData = &notes;
        CK(cudaGraphAddHostNode(&hn, b, &kn, 1, &hp));
        cudaGraphExec_t be;
        CK(cudaGraphInstantiate(&be, b, 0));
        CK(cudaGraphLaunch(be, s));
        CK(cudaGraphLaunch(be, s));
        CK(cudaStreamSynchronize(s));
        CK(cudaMemcpy(h.data(), d, N * sizeof(float), cudaMemcpyDeviceToHost));
        printf("built graph: %.0f, host node ran %d times\n", sum(h.data(), N), notes);
        CK(cudaGraphExecDestroy(be));
        CK(cudaGraphDestroy(b));
    }

    // A host function and events.
    {
        int ran = 0;
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        CK(cudaEventRecord(e0, s));
        launch(add, d, 1.0f, s);
        CK(cudaLaunchHostFunc(s, host_note, &ran));
        CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        printf("host function ran %d time(s); events %s\n", ran, ms >= 0 ? "ordered" : "not ordered");
        CK(cudaEventDestroy(e0));
        CK(cudaEventDestroy(e1));
    }

    // An invalid launch: 2048 threads a block. Its error is the program's, as untraced.
    {
        int n = N;
        float v = 1.0f;
        void *args[] = {&d, &n, &v};
        cudaError_t e = cudaLaunchKernel((const void *)add, dim3(1), dim3(2048), args, 0, s);
        cudaError_t last = cudaGetLastError();
        printf("invalid launch: %s, then %s\n", cudaGetErrorName(e), cudaGetErrorName(last));
    }

    // The driver API in a context of its own.
    {
        CUdevice dev;
        CUcontext ctx, prev;
        CU(cuDeviceGet(&dev, 0));
        CU(cuCtxGetCurrent(&prev));
        CUctxCreateParams params = {};
        CU(cuCtxCreate(&ctx, &params, 0, dev));
        CUdeviceptr p;
        CU(cuMemAlloc(&p, N * sizeof(unsigned)));
        CU(cuMemsetD32(p, 7u, N));
        std::vector<unsigned> u(N);
        CU(cuMemcpyDtoH(u.data(), p, N * sizeof(unsigned)));
        unsigned long long t = 0;
        for (unsigned x : u) t += x;
        printf("driver context: %llu\n", t);
        CU(cuMemFree(p));
        CU(cuCtxDestroy(ctx));
        CU(cuCtxSetCurrent(prev));
    }

    CK(cudaStreamDestroy(s));
    CK(cudaFree(d));
    // The last line as tests/gpu/run.sh reads a program's verdict.
    if (failures == 0) printf("edge_cases: OK\n");
    else printf("edge_cases: %d calls failed\n", failures);
    return failures == 0 ? 0 : 1;
}
