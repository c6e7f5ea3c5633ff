/* dlsym_missing PLUGIN: what dlsym answers for a driver function the driver lacks
 * (cuGraphCreate: simcuda has no graphs) and for one it has (cuDriverGetVersion), by every
 * route, before and after the driver is loaded (dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)).
 * One line per lookup:
 *   <route> <name> found=<0|1> error=<dlerror()'s text, or (none)>
 * routes: default (RTLD_DEFAULT), next (RTLD_NEXT), program (a handle from dlopen(NULL)),
 * driver (the handle on libcuda.so.1), plugin (RTLD_DEFAULT from PLUGIN, deepbind_plugin.c,
 * opened RTLD_LOCAL: a library with a scope of its own, where libcuda.so.1 is), and under rtrace
 * rtrace (a handle on the LD_PRELOAD library: these lines only when it is loaded); default and
 * plugin once more for cuPluginOwn, which only the plugin's scope defines; and last global
 * (RTLD_DEFAULT once the driver was opened again with RTLD_GLOBAL). Then calls
 * cuDriverGetVersion through the driver handle's answer and prints
 *   dlsym_missing ok calls=1 */
#define _GNU_SOURCE /* RTLD_DEFAULT, RTLD_NEXT */
#include "common.h"

#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

static const char *const NAMES[] = {"cuGraphCreate", "cuDriverGetVersion"};

static void show(const char *route, const char *name, void *found) {
    const char *err = dlerror();
    printf("%s %s found=%d error=%s\n", route, name, found != NULL, err ? err : "(none)");
}

int main(int argc, char **argv) {
    REQUIRE(argc == 2, "usage: dlsym_missing PLUGIN");
    void *program = dlopen(NULL, RTLD_NOW);
    REQUIRE(program != NULL, "dlopen(NULL): %s", dlerror());
    for (int i = 0; i < 2; i++) {
        dlerror();
        show("default", NAMES[i], dlsym(RTLD_DEFAULT, NAMES[i]));
    }
    void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    REQUIRE(driver != NULL, "dlopen: %s", dlerror());
    void *plugin = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    REQUIRE(plugin != NULL, "dlopen: %s", dlerror());
    void *(*lookup)(const char *) = (void *(*)(const char *))dlsym(plugin, "plugin_lookup");
    REQUIRE(lookup != NULL, "dlsym: %s", dlerror());
    /* Under rtrace: a handle on librtrace.so itself (the first object LD_PRELOAD names). */
    const char *preload = getenv("LD_PRELOAD");
    void *rtrace = preload ? dlopen(preload, RTLD_NOW | RTLD_NOLOAD) : NULL;
    void *version_fn = NULL;
    for (int i = 0; i < 2; i++) {
        const char *n = NAMES[i];
        dlerror();
        show("default", n, dlsym(RTLD_DEFAULT, n));
        show("next", n, dlsym(RTLD_NEXT, n));
        show("program", n, dlsym(program, n));
        void *d = dlsym(driver, n);
        show("driver", n, d);
        show("plugin", n, lookup(n));
        if (rtrace != NULL)
            show("rtrace", n, dlsym(rtrace, n));
        if (i == 1)
            version_fn = d;
    }
    /* A name only the plugin's scope defines. */
    show("default", "cuPluginOwn", dlsym(RTLD_DEFAULT, "cuPluginOwn"));
    show("plugin", "cuPluginOwn", lookup("cuPluginOwn"));
    REQUIRE(dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL) != NULL, "dlopen: %s", dlerror());
    for (int i = 0; i < 2; i++)
        show("global", NAMES[i], dlsym(RTLD_DEFAULT, NAMES[i]));
    REQUIRE(version_fn != NULL, "no cuDriverGetVersion");
    int version = 0;
    CHECK(((PFN_cuDriverGetVersion_v2020)version_fn)(&version));
    REQUIRE(version == 13000, "version=%d", version);
    printf("dlsym_missing ok calls=%ld\n", calls);
    return 0;
}
