/* Hot-path benchmark: times N calls of a cheap driver function, R rounds.
 * Prints one line per round: "round <r> ns_per_call <x>".
 * Usage: hotpath [calls-per-round] [rounds] [nvtx]
 * With "nvtx", each "call" is an NVTX push and pop of one range instead.
 * HOTPATH_WARMUP (default 1000) sets the untimed calls (or pairs) made first: more than a
 * traced thread's buffer holds, and the timed rounds find its pages in memory (a buffer's first
 * lap faults the trace file's pages in: rtrace's rings are pages of the file).
 * Built and run side by side, untraced and traced, by tools/bench-hotpath.sh. */
#include <cuda.h>
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <time.h>

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 200000;
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    int nvtx = argc > 3 && strcmp(argv[3], "nvtx") == 0;
    if (cuInit(0) != CUDA_SUCCESS) {
        fprintf(stderr, "cuInit failed\n");
        return 1;
    }
    int v = 0;
    const char *w = getenv("HOTPATH_WARMUP");
    long warmup = w ? atol(w) : 1000;
    for (long i = 0; !nvtx && i < warmup; i++) cuDriverGetVersion(&v); /* warm-up */
    for (long i = 0; i < 1000; i++) cuDriverGetVersion(&v);
    for (long i = 0; nvtx && i < warmup; i++) {
        nvtxRangePushA("step");
        nvtxRangePop();
    }
    for (int r = 0; r < rounds; r++) {
        double t0 = now_ns();
        if (nvtx) {
            for (long i = 0; i < n; i++) {
                nvtxRangePushA("step");
                nvtxRangePop();
            }
        } else {
            for (long i = 0; i < n; i++) {
                if (cuDriverGetVersion(&v) != CUDA_SUCCESS) return 2;
            }
        }
        double t1 = now_ns();
        printf("round %d ns_per_call %.2f\n", r, (t1 - t0) / n);
    }
    return 0;
}
