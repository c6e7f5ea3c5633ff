/* NVTX v3 from two images (this program and libnvtx_lib.so): nested push/pop ranges with
 * attributes (category, colour, payload), a mark, a domain with a registered string, a
 * start/end range ended on another thread, a named category and a named OS thread. Prints
 * the nesting levels NVTX returned ("-2" everywhere without a tool). Then external correlation
 * ids through librtrace.so's C ABI (inject/rtrace.h), looked up with dlsym so that the program
 * runs without rtrace too ("external none"). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

void lib_work(void);

static nvtxRangeId_t async_id;

static void *worker(void *arg) {
    (void)arg;
    nvtxNameOsThreadA((uint32_t)syscall(SYS_gettid), "nvtx worker");
    nvtxRangeEnd(async_id);
    nvtxRangePushA("worker range");
    nvtxRangePop();
    return NULL;
}

int main(void) {
    nvtxNameCategoryA(3, "io");
    nvtxDomainHandle_t app = nvtxDomainCreateA("app");
    nvtxStringHandle_t step = nvtxDomainRegisterStringA(app, "registered step");
    int l0 = nvtxRangePushA("outer");
    nvtxEventAttributes_t a = {0};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.category = 3;
    a.colorType = NVTX_COLOR_ARGB;
    a.color = 0xFF00FF00u;
    a.payloadType = NVTX_PAYLOAD_TYPE_INT64;
    a.payload.llValue = -5;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = "inner";
    int l1 = nvtxRangePushEx(&a);
    nvtxMarkA("here");
    int p1 = nvtxRangePop();
    int p0 = nvtxRangePop();
    nvtxEventAttributes_t r = {0};
    r.version = NVTX_VERSION;
    r.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    r.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    r.message.registered = step;
    int d0 = nvtxDomainRangePushEx(app, &r);
    int dp = nvtxDomainRangePop(app);
    async_id = nvtxRangeStartA("async");
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) != 0 || pthread_join(t, NULL) != 0) return 1;
    lib_work();
    int extra = nvtxRangePop();
    printf("levels %d %d %d %d domain %d %d extra pop %d\n", l0, l1, p1, p0, d0, dp, extra);

    int (*push)(uint32_t, uint64_t) =
        (int (*)(uint32_t, uint64_t))dlsym(RTLD_DEFAULT, "rtrace_push_external_correlation");
    int (*pop)(uint32_t, uint64_t *) =
        (int (*)(uint32_t, uint64_t *))dlsym(RTLD_DEFAULT, "rtrace_pop_external_correlation");
    if (!push || !pop) {
        printf("external none\n");
        return 0;
    }
    uint64_t x = 0, y = 0, z = 99;
    int r1 = push(2, 42), r2 = push(2, 43), r3 = push(7, 5);
    int r4 = pop(2, &x), r5 = pop(2, &y), r6 = pop(2, &z), r7 = pop(7, NULL);
    printf("external %d %d %d pop %d %llu %d %llu %d %llu %d\n", r1, r2, r3, r4,
           (unsigned long long)x, r5, (unsigned long long)y, r6, (unsigned long long)z, r7);
    return 0;
}
