/* exits: `exits MODE` makes some driver calls, prints `exits mode=MODE calls=N` (flushed) and
 * ends the way MODE says:
 *   return          returns 0 from main
 *   exit            a helper thread calls exit(3) while the main thread is still making calls;
 *                   N counts the calls made before exit() (the main thread may make a few more)
 *   _exit           _exit(4): no atexit handlers, no stdio flush
 *   sigterm         raise(SIGTERM) with the default disposition: killed by signal 15
 *   sigint          raise(SIGINT) with the default disposition: killed by signal 2
 *   signal-flags    installs handlers with signal() and prints what sigaction reports of them
 *                   (no driver call)
 *   sigint-handler  checks that SIGINT's disposition is SIG_DFL, installs its own handler with
 *                   sigaction, raises SIGINT (the handler writes "handled\n" to stdout with
 *                   write(2)), makes more calls, then prints its line and returns 0
 * Calls: setup is 6 (init, device, primary context, make current, alloc, memset), then 100
 * cheap calls; `sigint-handler` makes 10 more after the signal; `exit` makes 50 in the helper.
 * So N = 106 for return, _exit, sigterm and sigint, 116 for sigint-handler, and at least 1156 for exit
 * (the helper waits until the main thread has made 1000 loop calls). */
#include "common.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

static atomic_long shared_calls; /* `exit` mode: main loop + helper */
static volatile sig_atomic_t handled;

static void on_sigint(int sig) {
    (void)sig;
    static const char msg[] = "handled\n";
    handled = 1;
    if (write(1, msg, sizeof msg - 1) < 0)
        _exit(10);
}

static void *exit_helper(void *arg) {
    long setup = *(long *)arg;
    CUcontext cur;
    while (atomic_load(&shared_calls) < 1000)
        sched_yield();
    for (int i = 0; i < 50; i++) {
        CHECK(cuCtxGetCurrent(&cur));
        atomic_fetch_add(&shared_calls, 1);
    }
    printf("exits mode=exit calls=%ld\n", setup + atomic_load(&shared_calls));
    fflush(stdout);
    exit(3);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: exits return|exit|_exit|sigterm|sigint|sigint-handler|signal-flags\n");
        return 2;
    }
    const char *mode = argv[1];
    if (strcmp(mode, "signal-flags") == 0) {
        /* What signal() installed, as sigaction reports it (glibc: SA_RESTART, the signal
         * itself blocked while its handler runs), for SIGUSR1 and SIGTERM. */
        int sigs[] = {SIGUSR1, SIGTERM};
        for (int i = 0; i < 2; i++) {
            struct sigaction got;
            REQUIRE(signal(sigs[i], on_sigint) != SIG_ERR, "signal");
            REQUIRE(sigaction(sigs[i], NULL, &got) == 0, "sigaction");
            printf("signal %d: restart=%d self-blocked=%d handler=%d\n", sigs[i],
                   !!(got.sa_flags & SA_RESTART), sigismember(&got.sa_mask, sigs[i]),
                   got.sa_handler == on_sigint);
        }
        return 0;
    }
    setup_context();
    cheap(100);

    if (strcmp(mode, "return") == 0) {
        printf("exits mode=return calls=%ld\n", calls);
        fflush(stdout);
        return 0;
    } else if (strcmp(mode, "exit") == 0) {
        pthread_t helper;
        long setup = calls;
        REQUIRE(pthread_create(&helper, NULL, exit_helper, &setup) == 0, "thread");
        int version;
        for (;;) {
            CHECK(cuDriverGetVersion(&version));
            atomic_fetch_add(&shared_calls, 1);
        }
    } else if (strcmp(mode, "_exit") == 0) {
        printf("exits mode=_exit calls=%ld\n", calls);
        fflush(stdout);
        _exit(4);
    } else if (strcmp(mode, "sigterm") == 0) {
        printf("exits mode=sigterm calls=%ld\n", calls);
        fflush(stdout);
        raise(SIGTERM);
        fprintf(stderr, "exits: survived SIGTERM\n");
        return 1;
    } else if (strcmp(mode, "sigint") == 0) {
        printf("exits mode=sigint calls=%ld\n", calls);
        fflush(stdout);
        raise(SIGINT);
        fprintf(stderr, "exits: survived SIGINT\n");
        return 1;
    } else if (strcmp(mode, "sigint-handler") == 0) {
        struct sigaction old, sa;
        REQUIRE(sigaction(SIGINT, NULL, &old) == 0, "sigaction");
        REQUIRE(!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL,
                "SIGINT disposition is not SIG_DFL");
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_sigint;
        sigemptyset(&sa.sa_mask);
        REQUIRE(sigaction(SIGINT, &sa, NULL) == 0, "sigaction");
        raise(SIGINT);
        REQUIRE(handled, "handler did not run");
        cheap(10);
        printf("exits mode=sigint-handler calls=%ld\n", calls);
        fflush(stdout);
        return 0;
    }
    fprintf(stderr, "exits: unknown mode %s\n", mode);
    return 2;
}
