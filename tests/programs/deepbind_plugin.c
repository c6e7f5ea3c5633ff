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
 * while dlopen loads it, before the program can reach it.
 * Built with -DSEAL_RELRO (and -z now -z relro), its constructor seals its RELRO pages, where its
 * GOT is, with mseal(2) (Linux 6.10): nothing can make them writable again. */
#define _GNU_SOURCE /* RTLD_DEFAULT, dl_iterate_phdr */
#include "common.h"

#include <dlfcn.h>

#ifdef SEAL_RELRO
#include <link.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

/* dl_iterate_phdr's callback: seals the RELRO pages of the object holding `data`. */
static int seal_relro(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    uintptr_t me = (uintptr_t)data, page = (uintptr_t)sysconf(_SC_PAGESIZE), lo = 0, hi = 0;
    int mine = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t at = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && me >= at && me < at + ph->p_memsz)
            mine = 1;
        if (ph->p_type == PT_GNU_RELRO) {
            lo = at & ~(page - 1);
            hi = (at + ph->p_memsz) & ~(page - 1);
        }
    }
    if (!mine)
        return 0;
    REQUIRE(hi > lo, "no RELRO pages");
    REQUIRE(syscall(462 /* mseal */, lo, hi - lo, 0) == 0, "mseal failed");
    return 1;
}
#endif

long plugin_early;
/* A name starting with "cu" that only the plugin's own scope defines (dlsym_missing looks it up). */
int cuPluginOwn;

__attribute__((constructor)) static void early(void) {
#ifdef SEAL_RELRO
    REQUIRE(dl_iterate_phdr(seal_relro, (void *)seal_relro) == 1, "plugin not found");
#endif
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
