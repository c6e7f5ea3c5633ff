/* two_runtimes: a program on libcudart.so.13 that opens a plugin linked to libcudart.so.12
 * (RTLD_LOCAL), as a PyTorch process may hold a plugin built for another CUDA. Each caller must
 * reach its own runtime, before and after the plugin is closed. Prints what each answered.
 * Usage: two_runtimes PLUGIN.so */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "%s\n", dlerror());
        return 2;
    }
    int (*plugin)(void) = (int (*)(void))dlsym(h, "plugin_runtime_version");
    if (!plugin) return 2;
    for (int i = 0; i < 3; i++) {
        int v = 0;
        cudaError_t rc = cudaRuntimeGetVersion(&v);
        int p = plugin();
        printf("main %d %d plugin %d\n", (int)rc, v, p);
    }
    if (dlclose(h) != 0) return 3;
    int v = 0;
    cudaError_t rc = cudaRuntimeGetVersion(&v);
    printf("main after dlclose %d %d\n", (int)rc, v);
    return 0;
}
