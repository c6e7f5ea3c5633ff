/* Drain-rate benchmark: THREADS threads call cuDriverGetVersion back to back for SECONDS,
 * then the program prints the calls made and, read from /proc before it exits, the CPU time
 * of rtrace's worker thread (user + system, in clock ticks) and of the whole process.
 * Usage: drain_rate [THREADS] [SECONDS]
 * Run traced by tools/bench-drain.sh, which reads the trace's recorded and dropped counts. */
#include <cuda.h>
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_int stop;
static long made[64];

static void *caller(void *arg) {
    long i = (long)arg;
    int v;
    long n = 0;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        for (int k = 0; k < 1024; k++)
            cuDriverGetVersion(&v);
        n += 1024;
    }
    made[i] = n;
    return NULL;
}

/* utime + stime of task `tid` of this process, in clock ticks; its name in `comm`. */
static long task_cpu(const char *tid, char *comm, size_t len) {
    char path[256], buf[1024];
    snprintf(path, sizeof path, "/proc/self/task/%s/stat", tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *open = strchr(buf, '('), *close = strrchr(buf, ')');
    if (!open || !close)
        return -1;
    snprintf(comm, len, "%.*s", (int)(close - open - 1), open + 1);
    /* Fields after the name: state is field 3; utime 14, stime 15. */
    char *p = close + 2;
    long utime = 0, stime = 0;
    for (int field = 3; field <= 15 && p; field++) {
        if (field == 14)
            utime = atol(p);
        if (field == 15)
            stime = atol(p);
        p = strchr(p, ' ');
        if (p)
            p++;
    }
    return utime + stime;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    double seconds = argc > 2 ? atof(argv[2]) : 2;
    if (threads < 1 || threads > 64 || cuInit(0) != CUDA_SUCCESS) {
        fprintf(stderr, "usage: drain_rate [THREADS<=64] [SECONDS] (cuInit must succeed)\n");
        return 1;
    }
    pthread_t t[64];
    for (long i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, caller, (void *)i);
    struct timespec ts = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
    atomic_store(&stop, 1);
    long total = 1; /* cuInit */
    for (int i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        total += made[i];
    }
    long worker = -1, all = 0;
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char comm[64];
        long c = task_cpu(e->d_name, comm, sizeof comm);
        if (c < 0)
            continue;
        all += c;
        if (strcmp(comm, "rtrace-worker") == 0)
            worker = c;
    }
    if (d)
        closedir(d);
    printf("made %ld worker_ticks %ld process_ticks %ld hz %ld\n", total, worker, all,
           sysconf(_SC_CLK_TCK));
    return 0;
}
