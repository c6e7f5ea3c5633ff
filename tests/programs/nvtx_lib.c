/* A shared library with NVTX of its own (its own NVTX instance, initialised separately from
 * the program's): used by nvtx.c. */
#include <nvtx3/nvToolsExt.h>

void lib_work(void) {
    nvtxRangePushA("lib range");
    nvtxRangePop();
}
