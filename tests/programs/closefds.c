/* closefds: `closefds MODE FILE [N]`: a program that closes descriptors it did not open, then
 * writes its own file. It sets up a context (6 calls) and makes 1000 cheap calls; then
 *   all:  closes every descriptor from 3 up to its limit (a daemon, `closefrom(3)`);
 *   low:  closes descriptors 3 to 255 (`os.closerange(3, 256)`);
 * opens FILE (created, truncated), writes "hello\n" to it, makes N cheap calls (default
 * 100000) in 10 rounds with a 5 ms pause after each, and closes FILE. It reads FILE back and
 * prints
 *   closefds mode=MODE fd=3 same=1 calls=C
 * (fd: the descriptor FILE got, 3 untraced; same=1: FILE holds exactly "hello\n"; C = 1006 + N). */
#include "common.h"

#include <fcntl.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

int main(int argc, char **argv) {
    REQUIRE(argc >= 3, "usage: closefds all|low FILE [N]");
    const char *mode = argv[1];
    long n = argc > 3 ? atol(argv[3]) : 100000;
    REQUIRE(n >= 0, "N must be at least 0");
    setup_context();
    cheap(1000);

    int last = 255;
    if (strcmp(mode, "all") == 0) {
        struct rlimit lim;
        REQUIRE(getrlimit(RLIMIT_NOFILE, &lim) == 0, "getrlimit");
        last = lim.rlim_cur > 65536 ? 65535 : (int)lim.rlim_cur - 1;
    } else {
        REQUIRE(strcmp(mode, "low") == 0, "unknown mode %s", mode);
    }
    fflush(stdout);
    for (int fd = 3; fd <= last; fd++)
        close(fd);

    int mine = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    REQUIRE(mine >= 0, "open %s", argv[2]);
    REQUIRE(write(mine, "hello\n", 6) == 6, "write");
    for (int round = 0; round < 10; round++) {
        cheap(n / 10 + (round < n % 10));
        usleep(5000);
    }
    REQUIRE(close(mine) == 0, "close");

    char buf[64];
    int in = open(argv[2], O_RDONLY);
    REQUIRE(in >= 0, "reopen %s", argv[2]);
    ssize_t got = read(in, buf, sizeof buf);
    close(in);
    int same = got == 6 && memcmp(buf, "hello\n", 6) == 0;
    printf("closefds mode=%s fd=%d same=%d calls=%ld\n", mode, mine, same, calls);
    return 0;
}
