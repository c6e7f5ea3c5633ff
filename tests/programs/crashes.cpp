/* crashes: `crashes MODE [N] [COUNTS]` makes 6 setup calls and N cheap driver calls (default
 * 100000), prints `crashes mode=MODE calls=C` (flushed) and ends the way MODE says, before any
 * of rtrace's buffers could be written out in the ordinary way:
 *   return      returns 0 from main
 *   abort       abort(): SIGABRT
 *   segv        a store through a null pointer: SIGSEGV
 *   throw       an uncaught C++ exception: std::terminate, SIGABRT
 *   sigkill     kill(getpid(), SIGKILL)
 *   exec-true   execs /bin/true (status 0, no driver calls in the new image)
 *   exec-self   execs itself (same pid) in mode `return` with the same N: two images, each
 *               printing its line
 *   threads     4 threads call cuDriverGetVersion in a loop, each counting its calls after
 *               they return in a file COUNTS (4 longs, mapped shared: the counts survive the
 *               process); once each made 1000, the main thread raises SIGTERM (default
 *               disposition): killed by signal 15, the threads still calling. C counts the
 *               setup and loop calls of the main thread only.
 * With CRASHES_KERNELS=K1,K2 in the environment, before its line it also loads a module (2
 * calls), launches K1 `empty` kernels, synchronizes, sleeps CRASHES_PAUSE_MS (default 300: the
 * worker writes what CUPTI handed back), then launches K2 more, which CUPTI has not handed back
 * when the process ends; C counts these calls too. CRASHES_END_PAUSE_MS: a pause after the
 * launches, before the end (default none).
 * Compiled as C++ (for `throw`). */
#include "common.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdexcept>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static volatile long *thread_counts;

static void *caller(void *arg) {
    long i = (long)arg;
    int version;
    for (;;) {
        CHECK(cuDriverGetVersion(&version));
        __atomic_store_n(&thread_counts[i], thread_counts[i] + 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: crashes MODE [N] [COUNTS]\n");
        return 2;
    }
    const char *mode = argv[1];
    long n = argc > 2 ? atol(argv[2]) : 100000;
    setup_context();
    cheap(n);
    const char *kernels = getenv("CRASHES_KERNELS");
    if (kernels) {
        long k1 = atol(kernels), k2 = strchr(kernels, ',') ? atol(strchr(kernels, ',') + 1) : 0;
        const char *pause = getenv("CRASHES_PAUSE_MS");
        CUmodule module;
        CUfunction empty;
        CHECK(cuModuleLoadData(&module, MODULE_IMAGE));
        CHECK(cuModuleGetFunction(&empty, module, "empty"));
        for (long i = 0; i < k1 + k2; i++) {
            if (i == k1) {
                CHECK(cuCtxSynchronize());
                usleep((pause ? atol(pause) : 300) * 1000);
            }
            CHECK(cuLaunchKernel(empty, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
        }
        const char *end_pause = getenv("CRASHES_END_PAUSE_MS");
        if (end_pause) usleep(atol(end_pause) * 1000);
    }
    printf("crashes mode=%s calls=%ld\n", mode, calls);
    fflush(stdout);

    if (strcmp(mode, "return") == 0) {
        return 0;
    } else if (strcmp(mode, "abort") == 0) {
        abort();
    } else if (strcmp(mode, "segv") == 0) {
        volatile int *volatile null = NULL;
        *null = 1;
    } else if (strcmp(mode, "throw") == 0) {
        throw std::runtime_error("crashes: uncaught");
    } else if (strcmp(mode, "sigkill") == 0) {
        kill(getpid(), SIGKILL);
    } else if (strcmp(mode, "exec-true") == 0) {
        execl("/bin/true", "true", (char *)NULL);
        return 3;
    } else if (strcmp(mode, "exec-self") == 0) {
        char count[32];
        snprintf(count, sizeof count, "%ld", n);
        execl("/proc/self/exe", "crashes", "return", count, (char *)NULL);
        return 3;
    } else if (strcmp(mode, "threads") == 0) {
        REQUIRE(argc > 3, "threads needs a COUNTS file");
        int fd = open(argv[3], O_RDWR | O_CREAT | O_TRUNC, 0600);
        REQUIRE(fd >= 0 && ftruncate(fd, 4096) == 0, "counts file");
        void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        REQUIRE(p != MAP_FAILED, "mmap");
        thread_counts = (volatile long *)p;
        pthread_t t[4];
        for (long i = 0; i < 4; i++)
            REQUIRE(pthread_create(&t[i], NULL, caller, (void *)i) == 0, "thread");
        for (long i = 0; i < 4; i++)
            while (__atomic_load_n(&thread_counts[i], __ATOMIC_ACQUIRE) < 1000)
                sched_yield();
        raise(SIGTERM);
        return 4;
    }
    fprintf(stderr, "crashes: unknown mode %s\n", mode);
    return 2;
}
