/* Memory of many live threads: THREADS threads each make CALLS driver calls, then wait; while
 * they all live, the main thread prints its VmRSS and VmHWM (kB, from /proc/self/status); then
 * they exit. Usage: threads_rss [THREADS] [CALLS]. Run untraced and traced, side by side. */
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_barrier_t ready, done;
static long calls;

static void *worker(void *arg) {
    (void)arg;
    int v;
    for (long i = 0; i < calls; i++)
        cuDriverGetVersion(&v);
    pthread_barrier_wait(&ready);
    pthread_barrier_wait(&done);
    return NULL;
}

static long status_kb(const char *key) {
    char line[256];
    long kb = -1;
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, strlen(key)) == 0)
            kb = atol(line + strlen(key));
    if (f)
        fclose(f);
    return kb;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    calls = argc > 2 ? atol(argv[2]) : 1;
    if (n < 1 || cuInit(0) != CUDA_SUCCESS)
        return 1;
    pthread_t *t = calloc(n, sizeof *t);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 << 10);
    pthread_barrier_init(&ready, NULL, n + 1);
    pthread_barrier_init(&done, NULL, n + 1);
    for (int i = 0; i < n; i++)
        if (pthread_create(&t[i], &attr, worker, NULL) != 0)
            return 2;
    pthread_barrier_wait(&ready);
    printf("threads %d calls %ld rss_kb %ld hwm_kb %ld\n", n, calls, status_kb("VmRSS:"),
           status_kb("VmHWM:"));
    fflush(stdout);
    pthread_barrier_wait(&done);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    return 0;
}
