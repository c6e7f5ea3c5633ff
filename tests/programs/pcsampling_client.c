/* pcsampling_client: a client of CUPTI's PC Sampling API (cupti_pcsampling.h), run against the
 * simulated CUPTI and driver. It subscribes to the resource callbacks CONTEXT_CREATED and
 * CONTEXT_DESTROY_STARTING; on creation it enables and configures PC sampling (from inside the
 * callback, as a profiler does); it launches kernels on the primary context and on a created
 * one, reads PCs with cuptiPCSamplingGetData in small pieces, and lets cuCtxDestroy disable the
 * created context's sampling (which fills the configured buffer). Prints one line per event;
 * exits 1 on any unexpected result. With SIMCUPTI_PC_SAMPLING=unsupported it checks that
 * cuptiPCSamplingEnable returns CUPTI_ERROR_NOT_SUPPORTED and that kernels still run. */
#include "common.h"

#include <cupti.h>
#include <cupti_pcsampling.h>
#include <string.h>

#define CUPTI_CHECK(call)                                                                   \
    do {                                                                                    \
        CUptiResult r_ = (call);                                                            \
        if (r_ != CUPTI_SUCCESS) {                                                          \
            fprintf(stderr, "%s:%d: %s returned %d\n", __FILE__, __LINE__, #call, (int)r_); \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

#define MAX_PCS 16
#define MAX_REASONS 9

/* One buffer per context (the primary one, the created one). */
struct buffer {
    CUpti_PCSamplingData data;
    CUpti_PCSamplingPCData pcs[MAX_PCS];
    CUpti_PCSamplingStallReason reasons[MAX_PCS][MAX_REASONS];
};
static struct buffer buffers[2];
static int ncontexts, unsupported;
static uint64_t image_crc; /* cuptiGetCubinCrc of MODULE_IMAGE: every PC's cubinCrc */

static void setup_buffer(struct buffer *b, size_t n) {
    memset(b, 0, sizeof *b);
    b->data.size = sizeof b->data;
    b->data.collectNumPcs = n;
    b->data.pPcData = b->pcs;
    for (int i = 0; i < MAX_PCS; i++) {
        b->pcs[i].size = sizeof b->pcs[i];
        b->pcs[i].stallReason = b->reasons[i];
    }
}

static void print_data(const char *what, const CUpti_PCSamplingData *d) {
    printf("%s pcs=%zu remaining=%zu total=%llu dropped=%llu non_user=%llu\n", what,
           d->totalNumPcs, d->remainingNumPcs, (unsigned long long)d->totalSamples,
           (unsigned long long)d->droppedSamples,
           (unsigned long long)d->nonUsrKernelsTotalSamples);
    for (size_t i = 0; i < d->totalNumPcs; i++) {
        CUpti_PCSamplingPCData *p = &d->pPcData[i];
        REQUIRE(p->cubinCrc == image_crc, "crc %llx", (unsigned long long)p->cubinCrc);
        printf("  pc %s+%llu fn=%u corr=%u", p->functionName, (unsigned long long)p->pcOffset,
               p->functionIndex, p->correlationId);
        for (size_t j = 0; j < p->stallReasonCount; j++)
            printf(" %u:%u", p->stallReason[j].pcSamplingStallReasonIndex,
                   p->stallReason[j].samples);
        printf("\n");
        free(p->functionName);
    }
}

static void enable(CUcontext ctx, int which) {
    CUpti_PCSamplingEnableParams e = {CUpti_PCSamplingEnableParamsSize, NULL, ctx};
    CUptiResult r = cuptiPCSamplingEnable(&e);
    if (unsupported) {
        REQUIRE(r == CUPTI_ERROR_NOT_SUPPORTED, "enable returned %d", (int)r);
        printf("enable not supported\n");
        return;
    }
    CUPTI_CHECK(r);
    REQUIRE(cuptiPCSamplingEnable(&e) == CUPTI_ERROR_INVALID_OPERATION, "enabled twice");

    size_t n = 0;
    CUpti_PCSamplingGetNumStallReasonsParams np = {
        CUpti_PCSamplingGetNumStallReasonsParamsSize, NULL, ctx, &n};
    CUPTI_CHECK(cuptiPCSamplingGetNumStallReasons(&np));
    uint32_t index[MAX_REASONS];
    char names[MAX_REASONS][CUPTI_STALL_REASON_STRING_SIZE], *pn[MAX_REASONS];
    for (int i = 0; i < MAX_REASONS; i++) pn[i] = names[i];
    CUpti_PCSamplingGetStallReasonsParams sp = {
        CUpti_PCSamplingGetStallReasonsParamsSize, NULL, ctx, n, index, pn};
    CUPTI_CHECK(cuptiPCSamplingGetStallReasons(&sp));
    if (which == 0) {
        printf("stall reasons %zu:", n);
        for (size_t i = 0; i < n; i++) printf(" %u", index[i]);
        printf("\n%s\n", names[1]);
    }

    /* The primary context keeps the default reasons; the created one selects two. */
    setup_buffer(&buffers[which], 2);
    static uint32_t two[] = {14, 28};
    CUpti_PCSamplingConfigurationInfo info[3];
    memset(info, 0, sizeof info);
    info[0].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER;
    info[0].attributeData.samplingDataBufferData.samplingDataBuffer = &buffers[which].data;
    info[1].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD;
    info[1].attributeData.samplingPeriodData.samplingPeriod = 9;
    info[2].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON;
    info[2].attributeData.stallReasonData.stallReasonCount = 2;
    info[2].attributeData.stallReasonData.pStallReasonIndex = two;
    CUpti_PCSamplingConfigurationInfoParams cp = {
        CUpti_PCSamplingConfigurationInfoParamsSize, NULL, ctx, which == 0 ? 2 : 3, info};
    CUPTI_CHECK(cuptiPCSamplingSetConfigurationAttribute(&cp));

    CUpti_PCSamplingConfigurationInfo q[2];
    memset(q, 0, sizeof q);
    q[0].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD;
    q[1].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_HARDWARE_BUFFER_SIZE;
    CUpti_PCSamplingConfigurationInfoParams qp = {
        CUpti_PCSamplingConfigurationInfoParamsSize, NULL, ctx, 2, q};
    CUPTI_CHECK(cuptiPCSamplingGetConfigurationAttribute(&qp));
    printf("enabled ctx#%d period=%u hw=%zu\n", which,
           q[0].attributeData.samplingPeriodData.samplingPeriod,
           q[1].attributeData.hardwareBufferSizeData.hardwareBufferSize);
}

static void CUPTIAPI on_callback(void *userdata, CUpti_CallbackDomain domain,
                                 CUpti_CallbackId cbid, const void *data) {
    (void)userdata;
    if (domain != CUPTI_CB_DOMAIN_RESOURCE) return;
    const CUpti_ResourceData *r = data;
    if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED) {
        printf("context created\n");
        enable(r->context, ncontexts++);
    } else if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
        uint32_t id = 0;
        CUPTI_CHECK(cuptiGetContextId(r->context, &id)); /* still alive */
        printf("context destroy starting\n");
    }
}

int main(void) {
    const char *env = getenv("SIMCUPTI_PC_SAMPLING");
    unsupported = env && strcmp(env, "unsupported") == 0;
    CUpti_GetCubinCrcParams crc = {CUpti_GetCubinCrcParamsSize, strlen(MODULE_IMAGE),
                                   MODULE_IMAGE, 0};
    CUPTI_CHECK(cuptiGetCubinCrc(&crc));
    image_crc = crc.cubinCrc;
    CUpti_SubscriberHandle sub;
    CUPTI_CHECK(cuptiSubscribe(&sub, on_callback, NULL));
    CUPTI_CHECK(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE,
                                    CUPTI_CBID_RESOURCE_CONTEXT_CREATED));
    CUPTI_CHECK(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE,
                                    CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING));

    CUdevice dev;
    CUcontext primary, other;
    CUmodule mod;
    CUfunction empty;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&primary, dev));
    CHECK(cuCtxSetCurrent(primary));
    CHECK(cuModuleLoadData(&mod, MODULE_IMAGE));
    CHECK(cuModuleGetFunction(&empty, mod, "empty"));
    CHECK(cuLaunchKernel(empty, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    CHECK(cuLaunchKernel(empty, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    CHECK(cuCtxSynchronize());

    if (!unsupported) {
        struct buffer b;
        setup_buffer(&b, 3);
        CUpti_PCSamplingGetDataParams gp = {CUpti_PCSamplingGetDataParamsSize, NULL, primary,
                                            &b.data};
        CUPTI_CHECK(cuptiPCSamplingGetData(&gp));
        print_data("getdata", &b.data);
        setup_buffer(&b, 3);
        CUPTI_CHECK(cuptiPCSamplingGetData(&gp));
        print_data("getdata", &b.data);
    }

    /* A created context: enabled by the callback, disabled by its destruction. */
    CHECK(cuCtxCreate(&other, NULL, 0, dev));
    CUmodule mod2;
    CUfunction fill;
    CHECK(cuModuleLoadData(&mod2, MODULE_IMAGE));
    CHECK(cuModuleGetFunction(&fill, mod2, "empty"));
    CHECK(cuLaunchKernel(fill, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    CHECK(cuCtxDestroy(other));
    if (!unsupported) {
        print_data("destroyed", &buffers[1].data);
        CUpti_PCSamplingDisableParams dp = {CUpti_PCSamplingDisableParamsSize, NULL, other};
        REQUIRE(cuptiPCSamplingDisable(&dp) == CUPTI_ERROR_INVALID_OPERATION, "disabled");
        dp.ctx = primary;
        CUPTI_CHECK(cuptiPCSamplingDisable(&dp));
        print_data("disabled", &buffers[0].data);
    }
    CHECK(cuCtxSetCurrent(primary));
    CHECK(cuDevicePrimaryCtxRelease(dev));
    printf("pcsampling_client ok contexts=%d calls=%ld\n", ncontexts, calls);
    return 0;
}
