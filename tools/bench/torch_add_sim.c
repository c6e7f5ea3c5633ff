/* torch_add_sim: PyTorch's `x.add_(1)` loop as the CUDA runtime sees it, on the simulated
 * runtime (tests/programs/simcudart.c), driver and CUPTI. Per op, the calls PyTorch 2.11 makes
 * on CUDA 13 (measured on the H100 with rtrace and CUPTI's own counter: 6 runtime calls and 5
 * driver calls an op): cudaGetDevice three times (the device guard, TensorIterator, the current
 * stream), cudaLaunchKernel of an elementwise kernel (its cuLaunchKernel inside),
 * cudaGetLastError (C10_CUDA_KERNEL_LAUNCH_CHECK), cudaGetDevice (the guard's end); each
 * cudaGetDevice makes one cuCtxGetDevice_v2, as CUDA 13's runtime does. The kernel has the
 * mangled name of PyTorch's `add_` kernel.
 *
 * Usage: torch_add_sim [OPS]   (default 200000)
 * Prints `ops N` and, for each thread of the process, the voluntary and involuntary context
 * switches it made during the loop (from /proc/self/task/TID/status, read before and after):
 * `thread NAME vcsw N ivcsw N`. Run by tools/bench/callgrind_add.sh. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char MODULE_IMAGE[] =
    "simcuda-module\n"
    "kernel _ZN2at6native29vectorized_elementwise_kernelILi4ENS0_15CUDAFunctorOnSelf_"
    "addIfEESt5arrayIPcLm2EEEEviT0_T1_ 1500\n";

#define MAX_THREADS 64

struct task {
    char tid[32];
    char name[32];
    long vcsw, ivcsw;
};

/* The threads of this process and their context switches so far; how many. */
static int tasks(struct task *out) {
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) && n < MAX_THREADS) {
        if (e->d_name[0] == '.')
            continue;
        struct task *t = &out[n];
        memset(t, 0, sizeof *t);
        snprintf(t->tid, sizeof t->tid, "%s", e->d_name);
        char path[96], line[256];
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        while (fgets(line, sizeof line, f)) {
            if (!strncmp(line, "Name:", 5))
                sscanf(line + 5, " %31[^\n]", t->name);
            else if (!strncmp(line, "voluntary_ctxt_switches:", 24))
                t->vcsw = atol(line + 24);
            else if (!strncmp(line, "nonvoluntary_ctxt_switches:", 27))
                t->ivcsw = atol(line + 27);
        }
        fclose(f);
        n++;
    }
    if (d)
        closedir(d);
    return n;
}

#define RT(call)                                                                        \
    do {                                                                                \
        cudaError_t e_ = (call);                                                        \
        if (e_ != cudaSuccess) {                                                        \
            fprintf(stderr, "%s:%d: %s returned %d\n", __FILE__, __LINE__, #call, (int)e_); \
            exit(1);                                                                    \
        }                                                                               \
    } while (0)

int main(int argc, char **argv) {
    long ops = argc > 1 ? atol(argv[1]) : 200000;
    CUmodule mod;
    CUfunction add;
    float *x = NULL;
    int device;
    RT(cudaFree(NULL));
    if (cuModuleLoadData(&mod, MODULE_IMAGE) != CUDA_SUCCESS ||
        cuModuleGetFunction(&add, mod,
                            "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_15CUDAFunctorOnSelf_"
                            "addIfEESt5arrayIPcLm2EEEEviT0_T1_") != CUDA_SUCCESS) {
        fprintf(stderr, "module\n");
        return 1;
    }
    RT(cudaMalloc((void **)&x, 4096));
    int n = 1024;
    float one = 1.0f;
    void *args[] = {&n, &one, &x};
    dim3 grid = {1, 1, 1}, block = {128, 1, 1};
    static struct task before[MAX_THREADS], after[MAX_THREADS];
    int nb = tasks(before);
    for (long i = 0; i < ops; i++) {
        RT(cudaGetDevice(&device));
        RT(cudaGetDevice(&device));
        RT(cudaGetDevice(&device));
        RT(cudaLaunchKernel((const void *)add, grid, block, args, 0, NULL));
        RT(cudaGetLastError());
        RT(cudaGetDevice(&device));
    }
    int na = tasks(after);
    RT(cudaDeviceSynchronize());
    printf("ops %ld\n", ops);
    for (int i = 0; i < na; i++) {
        long v0 = 0, i0 = 0;
        for (int j = 0; j < nb; j++)
            if (!strcmp(before[j].tid, after[i].tid)) {
                v0 = before[j].vcsw;
                i0 = before[j].ivcsw;
            }
        printf("thread %s vcsw %ld ivcsw %ld\n", after[i].name, after[i].vcsw - v0,
               after[i].ivcsw - i0);
    }
    return 0;
}
