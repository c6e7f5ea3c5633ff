/* deepbind MODE PLUGIN [N], deepbind load PLUGIN [quiet] (below): opens PLUGIN (deepbind_plugin.c) with RTLD_DEEPBIND and MODE's
 * binding (`now`: RTLD_NOW, `lazy`: RTLD_LAZY), finds plugin_run with dlsym and runs it with N
 * (default 10), then makes one driver call of its own: cuDriverGetVersion through dlsym on the
 * driver's handle (the driver is loaded with the plugin). Prints one line:
 *   deepbind ok mode=MODE early=K calls=C
 * K: the calls the plugin's constructor made (DEEPBIND_EARLY), C: those plugin_run made plus
 * the program's one. */
#define _GNU_SOURCE /* RTLD_DEEPBIND */
#include "common.h"

#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <string.h>

/* `load` mode: the driver first (one call through dlsym on its handle; none with `quiet`), then
 * the plugin, which the program never enters: only its constructor runs. */
static int load_only(const char *plugin, int quiet) {
    if (!quiet) {
        void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        REQUIRE(driver != NULL, "dlopen: %s", dlerror());
        PFN_cuDriverGetVersion_v2020 version_fn = dlsym(driver, "cuDriverGetVersion");
        REQUIRE(version_fn != NULL, "dlsym: %s", dlerror());
        int version = 0;
        CHECK(version_fn(&version));
    }
    REQUIRE(dlopen(plugin, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND) != NULL, "dlopen: %s", dlerror());
    printf("deepbind ok mode=load calls=%ld\n", calls);
    return 0;
}

int main(int argc, char **argv) {
    if ((argc == 3 || (argc == 4 && strcmp(argv[3], "quiet") == 0)) && strcmp(argv[1], "load") == 0)
        return load_only(argv[2], argc == 4);
    if (argc < 3 || (strcmp(argv[1], "now") != 0 && strcmp(argv[1], "lazy") != 0)) {
        fprintf(stderr, "usage: deepbind now|lazy PLUGIN [N] | deepbind load PLUGIN [quiet]\n");
        return 2;
    }
    int mode = strcmp(argv[1], "now") == 0 ? RTLD_NOW : RTLD_LAZY;
    void *lib = dlopen(argv[2], mode | RTLD_LOCAL | RTLD_DEEPBIND);
    if (lib == NULL) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    long (*run)(long) = (long (*)(long))dlsym(lib, "plugin_run");
    long *early = dlsym(lib, "plugin_early");
    if (run == NULL || early == NULL) {
        fprintf(stderr, "dlsym: %s\n", dlerror());
        return 1;
    }
    long made = run(argc > 3 ? atol(argv[3]) : 10);
    void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    REQUIRE(driver != NULL, "dlopen: %s", dlerror());
    PFN_cuDriverGetVersion_v2020 version_fn = dlsym(driver, "cuDriverGetVersion");
    REQUIRE(version_fn != NULL, "dlsym: %s", dlerror());
    int version = 0;
    CHECK(version_fn(&version));
    printf("deepbind ok mode=%s early=%ld calls=%ld\n", argv[1], *early, made + calls);
    return 0;
}
