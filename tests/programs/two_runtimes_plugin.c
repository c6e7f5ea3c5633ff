/* A plugin linked to the simulated libcudart.so.12 (tests/programs/two_runtimes.c opens it):
 * its runtime calls must reach that runtime, not the program's libcudart.so.13. */
#include <cuda_runtime_api.h>

int plugin_runtime_version(void) {
    int v = 0;
    return cudaRuntimeGetVersion(&v) == cudaSuccess ? v : -1;
}
