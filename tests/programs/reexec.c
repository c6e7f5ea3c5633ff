/* reexec: `reexec [N [M] [WAIT_MS]]` (defaults 10, 20, 500). The first image calls cuInit and
 * makes N cheap calls (1 + N calls), waits WAIT_MS ms (so that librtrace.so's worker, with a
 * short RTRACE_FLUSH_MS, has written them: writing at exec is not what this program tests), then
 * execs itself, keeping its pid, as `reexec-second M`. The second image calls cuInit and makes M
 * cheap calls (1 + M calls) and exits 0. Prints two lines (same_pid=1: the second image has
 * the first's pid):
 *   reexec first ok calls=11
 *   reexec second ok same_pid=1 calls=21 */
#include "common.h"

#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc > 2 && strcmp(argv[0], "reexec-second") == 0) {
        long m = atol(argv[1]);
        CHECK(cuInit(0));
        cheap(m);
        printf("reexec second ok same_pid=%d calls=%ld\n", atol(argv[2]) == (long)getpid(),
               calls);
        return 0;
    }
    long n = argc > 1 ? atol(argv[1]) : 10;
    const char *m = argc > 2 ? argv[2] : "20";
    long wait_ms = argc > 3 ? atol(argv[3]) : 500;
    REQUIRE(n >= 0 && atol(m) >= 0 && wait_ms >= 0, "usage: reexec [N [M] [WAIT_MS]]");
    CHECK(cuInit(0));
    cheap(n);
    printf("reexec first ok calls=%ld\n", calls);
    fflush(stdout);
    struct timespec ts = {wait_ms / 1000, (wait_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    char pid[24];
    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    char *args[] = {"reexec-second", (char *)m, pid, NULL};
    execv("/proc/self/exe", args);
    REQUIRE(0, "execv: %s", strerror(errno));
    return 1;
}
