/* deepbind_plugin: a plugin linked with -lcuda, for deepbind.c, which opens it with
 * RTLD_DEEPBIND: its references to driver functions then bind to the driver library itself,
 * not to a preloaded librtrace.so.
 *
 * plugin_run(n): cuInit, then n cheap calls (common.h) through the PLT; built with
 * -DWITH_POINTER, one more cuDriverGetVersion through a pointer taken in the code (a GOT slot of
 * its own, bound when the plugin is loaded). Returns the calls it made: n + 1 (n + 2).
 * plugin_lookup(name): dlsym(RTLD_DEFAULT, name) from the plugin (a lookup from a library with
 * a scope of its own).
 * With DEEPBIND_EARLY=k in the environment, its constructor makes k cuDriverGetVersion calls
 * while dlopen loads it, before the program can reach it. */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include "common.h"

#include <dlfcn.h>

long plugin_early;

__attribute__((constructor)) static void early(void) {
    const char *k = getenv("DEEPBIND_EARLY");
    if (k == NULL)
        return;
    int version;
    for (long i = atol(k); i > 0; i--)
        CHECK(cuDriverGetVersion(&version));
    plugin_early = calls;
}

long plugin_run(long n) {
    long before = calls;
    CHECK(cuInit(0));
    cheap(n);
#ifdef WITH_POINTER
    CUresult (*volatile get_version)(int *) = cuDriverGetVersion;
    int version = 0;
    CHECK(get_version(&version));
    REQUIRE(version == 13000, "version=%d", version);
#endif
    return calls - before;
}

void *plugin_lookup(const char *name) {
    return dlsym(RTLD_DEFAULT, name);
}
