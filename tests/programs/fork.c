/* fork: `fork [K [L]]` (defaults 10 and 20). The parent initialises (4 calls), makes K cheap
 * calls and forks. The child calls cuInit again, sets up its own memory and makes L cheap calls
 * (11 + L calls in all), prints its line and ends with exit(0). The parent waits for it, then
 * makes K more cheap calls and a short teardown. Prints two lines, the child's first:
 *   fork child ok child_calls=31
 *   fork parent ok parent_calls=26 child_status=0
 * (parent_calls = 6 + 2K: 4 + K before fork, K + 2 after; child_calls = 11 + L.) */
#include "common.h"

#include <sys/wait.h>
#include <unistd.h>

static void child(long l) {
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr buf;
    unsigned int host[64];

    calls = 0; /* the child counts its own calls */
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuMemAlloc(&buf, sizeof host));
    CHECK(cuMemsetD32(buf, 42, 64));
    CHECK(cuMemcpyDtoH(host, buf, sizeof host));
    for (int i = 0; i < 64; i++)
        REQUIRE(host[i] == 42, "child: host[%d]=%u", i, host[i]);
    cheap(l);
    CHECK(cuCtxSynchronize());
    CHECK(cuMemFree(buf));
    CHECK(cuCtxSetCurrent(NULL));
    CHECK(cuDevicePrimaryCtxRelease(dev));
    printf("fork child ok child_calls=%ld\n", calls);
    fflush(stdout);
    exit(0);
}

int main(int argc, char **argv) {
    long k = argc > 1 ? atol(argv[1]) : 10;
    long l = argc > 2 ? atol(argv[2]) : 20;
    REQUIRE(k >= 0 && l >= 0, "usage: fork [K [L]]");
    CUdevice dev;
    CUcontext ctx;

    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    cheap(k);

    fflush(stdout);
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork");
    if (pid == 0)
        child(l);

    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid, "waitpid");
    REQUIRE(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    cheap(k);
    CHECK(cuCtxSynchronize());
    CHECK(cuDevicePrimaryCtxRelease(dev));
    printf("fork parent ok parent_calls=%ld child_status=%d\n", calls, WEXITSTATUS(status));
    return 0;
}
