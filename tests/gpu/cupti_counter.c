/*
 * cupti_counter.c — an independent reference for rtrace's call counts.
 *
 * A CUPTI callback-API injection library: the CUDA driver dlopens it during
 * cuInit when CUDA_INJECTION64_PATH names it, and calls InitializeInjection().
 * It subscribes to every callback of CUPTI_CB_DOMAIN_DRIVER_API and counts
 * the API_ENTER callbacks per callback id (and, at API_EXIT, the calls that
 * returned something other than CUDA_SUCCESS).  At process exit it writes
 *
 *     # cupti_counter pid=<pid> phase=<atexit|destructor> ...
 *     <callback name> <calls> <errors>
 *
 * to "$CUPTI_COUNT_OUTPUT.<pid>" (only callbacks seen at least once).  The
 * file is written at atexit time and rewritten, with the later counts, from
 * the library's destructor, which runs after every atexit handler (a
 * runtime's teardown calls included); each write goes to a temporary file
 * that is then renamed over the old one, so a reader never sees half a file.
 *
 * With CUPTI_COUNT_LIVE=1 the counts are kept in a file mapped shared,
 * "$CUPTI_COUNT_OUTPUT.<pid>.live" (MAX_CBID calls, then MAX_CBID errors, u64 each), which
 * the kernel keeps whatever ends the process (SIGKILL, a crash), with the callback names in
 * "$CUPTI_COUNT_OUTPUT.<pid>.names" ("<cbid> <name>" lines): tests/gpu/live_counts.py turns
 * the two into the text format above.
 *
 * With CUPTI_COUNT_DOMAIN=runtime it counts the runtime API domain
 * (CUPTI_CB_DOMAIN_RUNTIME_API) instead: callback ids of cupti_runtime_cbid.h, written as
 * "cbid_<id>" (CUPTI names no runtime callback), errors being results other than
 * cudaSuccess. tests/gpu/runtime_check.py compares them with rtrace's runtime API records.
 *
 * Calls made before the driver loaded this library (before or during the
 * first cuInit — cuGetProcAddress lookups, cuDriverGetVersion, cuInit
 * itself) are never seen by CUPTI.
 *
 * Build: gcc -shared -fPIC -O2 -o cupti_counter.so tests/gpu/cupti_counter.c \
 *            -I<CUPTI include> -I<CUDA include> -L<CUPTI lib> -lcupti -Wl,-rpath,<CUPTI lib>
 */
#define _GNU_SOURCE
#include <cupti.h>

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

#define MAX_CBID 8192

static uint64_t g_calls_own[MAX_CBID];
static uint64_t g_errors_own[MAX_CBID];
/* The counts: the arrays above, or a shared file mapping (CUPTI_COUNT_LIVE). */
static uint64_t *g_calls = g_calls_own;
static uint64_t *g_errors = g_errors_own;
static uint64_t g_out_of_range; /* callbacks whose id is >= MAX_CBID */
static char *g_names[MAX_CBID];
static int g_initialized;        /* set once by InitializeInjection */
static int g_init_status = -1;   /* 0: subscribed and enabled; else a CUptiResult */
static const char *g_init_step = "not initialized";
static CUpti_SubscriberHandle g_subscriber;
static uint32_t g_cupti_version;
/* The domain counted: the driver API's, or the runtime API's (CUPTI_COUNT_DOMAIN=runtime). */
static CUpti_CallbackDomain g_domain = CUPTI_CB_DOMAIN_DRIVER_API;

static void CUPTIAPI on_callback(void *userdata, CUpti_CallbackDomain domain,
                                 CUpti_CallbackId cbid, const void *data) {
    (void)userdata;
    if (domain != g_domain || data == NULL) return;
    const CUpti_CallbackData *cd = (const CUpti_CallbackData *)data;
    if (cbid >= MAX_CBID) {
        if (cd->callbackSite == CUPTI_API_ENTER)
            __atomic_fetch_add(&g_out_of_range, 1, __ATOMIC_RELAXED);
        return;
    }
    if (cd->callbackSite == CUPTI_API_ENTER) {
        __atomic_fetch_add(&g_calls[cbid], 1, __ATOMIC_RELAXED);
    } else if (cd->callbackSite == CUPTI_API_EXIT && cd->functionReturnValue != NULL) {
        /* A CUresult or a cudaError_t: both are 0 on success. */
        if (*(const int *)cd->functionReturnValue != 0)
            __atomic_fetch_add(&g_errors[cbid], 1, __ATOMIC_RELAXED);
    }
}

static void put_str(int fd, const char *s) {
    size_t len = strlen(s);
    while (len > 0) {
        ssize_t w = write(fd, s, len);
        if (w <= 0) return;
        s += w;
        len -= (size_t)w;
    }
}

static void write_counts(const char *phase) {
    const char *base = getenv("CUPTI_COUNT_OUTPUT");
    if (base == NULL || base[0] == '\0') return;
    char path[4096], tmp[4200], line[512];
    int pid = (int)getpid();
    snprintf(path, sizeof path, "%s.%d", base, pid);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return;
    snprintf(line, sizeof line,
             "# cupti_counter pid=%d phase=%s init=%d step=%s cupti_api_version=%u "
             "domain=%s out_of_range=%llu\n",
             pid, phase, g_init_status, g_init_step, g_cupti_version,
             g_domain == CUPTI_CB_DOMAIN_RUNTIME_API ? "runtime" : "driver",
             (unsigned long long)__atomic_load_n(&g_out_of_range, __ATOMIC_RELAXED));
    put_str(fd, line);
    for (uint32_t id = 0; id < MAX_CBID; ++id) {
        uint64_t calls = __atomic_load_n(&g_calls[id], __ATOMIC_RELAXED);
        uint64_t errors = __atomic_load_n(&g_errors[id], __ATOMIC_RELAXED);
        if (calls == 0 && errors == 0) continue;
        if (g_names[id] != NULL)
            snprintf(line, sizeof line, "%s %llu %llu\n", g_names[id],
                     (unsigned long long)calls, (unsigned long long)errors);
        else
            snprintf(line, sizeof line, "cbid_%u %llu %llu\n", id, (unsigned long long)calls,
                     (unsigned long long)errors);
        put_str(fd, line);
    }
    close(fd);
    rename(tmp, path);
}

static void at_exit_handler(void) { write_counts("atexit"); }

__attribute__((destructor)) static void at_unload(void) {
    if (__atomic_load_n(&g_initialized, __ATOMIC_ACQUIRE)) write_counts("destructor");
}

int InitializeInjection(void) {
    int expected = 0;
    if (!__atomic_compare_exchange_n(&g_initialized, &expected, 1, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        return 1; /* already done */

    cuptiGetVersion(&g_cupti_version);
    const char *domain = getenv("CUPTI_COUNT_DOMAIN");
    if (domain != NULL && strcmp(domain, "runtime") == 0) g_domain = CUPTI_CB_DOMAIN_RUNTIME_API;

    /* Names first: at exit CUPTI may already be shutting down. */
    for (uint32_t id = 1; id < MAX_CBID; ++id) {
        const char *name = NULL;
        if (g_domain == CUPTI_CB_DOMAIN_DRIVER_API &&
            cuptiGetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, id, &name) == CUPTI_SUCCESS &&
            name != NULL && name[0] != '\0')
            g_names[id] = strdup(name);
    }

    const char *base = getenv("CUPTI_COUNT_OUTPUT");
    const char *live = getenv("CUPTI_COUNT_LIVE");
    if (live != NULL && strcmp(live, "1") == 0 && base != NULL && base[0] != '\0') {
        char path[4096], line[512];
        size_t len = 2 * MAX_CBID * sizeof(uint64_t);
        snprintf(path, sizeof path, "%s.%d.live", base, (int)getpid());
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        void *map = fd >= 0 && ftruncate(fd, (off_t)len) == 0
                        ? mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                        : MAP_FAILED;
        if (fd >= 0) close(fd);
        if (map != MAP_FAILED) {
            g_calls = (uint64_t *)map;
            g_errors = g_calls + MAX_CBID;
        }
        snprintf(path, sizeof path, "%s.%d.names", base, (int)getpid());
        int nfd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        for (uint32_t id = 1; nfd >= 0 && id < MAX_CBID; ++id) {
            if (g_names[id] == NULL) continue;
            snprintf(line, sizeof line, "%u %s\n", id, g_names[id]);
            put_str(nfd, line);
        }
        if (nfd >= 0) close(nfd);
    }

    CUptiResult r = cuptiSubscribe(&g_subscriber, on_callback, NULL);
    if (r != CUPTI_SUCCESS) {
        g_init_status = (int)r;
        g_init_step = "cuptiSubscribe";
    } else {
        r = cuptiEnableDomain(1, g_subscriber, g_domain);
        g_init_status = (int)r;
        g_init_step = r == CUPTI_SUCCESS ? "ok" : "cuptiEnableDomain";
    }
    if (g_init_status != 0) {
        const char *msg = NULL;
        cuptiGetResultString((CUptiResult)g_init_status, &msg);
        char line[512];
        snprintf(line, sizeof line, "cupti_counter: %s failed: %d %s\n", g_init_step,
                 g_init_status, msg ? msg : "");
        put_str(2, line);
    }
    atexit(at_exit_handler);
    return 1;
}
