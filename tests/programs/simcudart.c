/* simcudart: a simulated CUDA runtime, built as libcudart.so.13 for the tests. A handful of
 * runtime functions with the real prototypes of cuda_runtime_api.h, each made of the driver
 * calls the real runtime makes, found as the real runtime finds them: dlopen("libcuda.so.1"),
 * dlsym of cuGetProcAddress_v2 only, every other function through it. Each call is reported to
 * a simulated CUPTI (tests/simcupti) when one is loaded, as real CUPTI hooks the real runtime:
 * simcupti_runtime_enter(cbid) at entry, simcupti_runtime_exit(cbid, result) at exit, with the
 * callback ids of cupti_runtime_cbid.h. The first call initialises the driver and retains the
 * primary context of device 0, inside that call as the real runtime does; a thread's first call
 * makes it current there. cudaLaunchKernel takes a CUfunction as its `func` (as the real one
 * takes a cudaFunction_t); cudaMemcpyAsync does not copy from device to device (simcuda has
 * no cuMemcpyDtoDAsync: cudaErrorUnknown). Errors: CUDA_SUCCESS is cudaSuccess, CUDA_ERROR_INVALID_VALUE
 * cudaErrorInvalidValue, CUDA_ERROR_OUT_OF_MEMORY cudaErrorMemoryAllocation, any other failure
 * cudaErrorUnknown. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti_runtime_cbid.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

typedef unsigned (*enter_fn)(unsigned);
typedef void (*exit_fn)(unsigned, unsigned);

/* The simulated CUPTI's runtime hooks, once it is loaded. */
static exit_fn hooks(enter_fn *enter) {
    static enter_fn e;
    static exit_fn x;
    if (!__atomic_load_n(&x, __ATOMIC_ACQUIRE)) {
        void *h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
        if (h) {
            enter_fn fe = (enter_fn)dlsym(h, "simcupti_runtime_enter");
            exit_fn fx = (exit_fn)dlsym(h, "simcupti_runtime_exit");
            if (fe && fx) {
                __atomic_store_n(&e, fe, __ATOMIC_RELEASE);
                __atomic_store_n(&x, fx, __ATOMIC_RELEASE);
            }
            dlclose(h);
        }
    }
    *enter = __atomic_load_n(&e, __ATOMIC_ACQUIRE);
    return *enter ? x : NULL;
}

/* Starts a runtime call: CUPTI's entry callback; ends it with its result. */
#define BEGIN(name)                                         \
    const unsigned cbid_ = CUPTI_RUNTIME_TRACE_CBID_##name; \
    enter_fn enter_;                                        \
    exit_fn exit_ = hooks(&enter_);                         \
    if (exit_) enter_(cbid_);
#define END(result)                               \
    do {                                          \
        cudaError_t r_ = (result);                \
        if (exit_) exit_(cbid_, (unsigned)r_);    \
        return r_;                                \
    } while (0)

static cudaError_t to_runtime(CUresult rc) {
    switch (rc) {
    case CUDA_SUCCESS: return cudaSuccess;
    case CUDA_ERROR_INVALID_VALUE: return cudaErrorInvalidValue;
    case CUDA_ERROR_OUT_OF_MEMORY: return cudaErrorMemoryAllocation;
    default: return cudaErrorUnknown;
    }
}

static struct {
    CUresult (*init)(unsigned);
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*retain)(CUcontext *, CUdevice);
    CUresult (*set_current)(CUcontext);
    CUresult (*mem_alloc)(CUdeviceptr *, size_t);
    CUresult (*mem_free)(CUdeviceptr);
    CUresult (*htod)(CUdeviceptr, const void *, size_t);
    CUresult (*dtoh)(void *, CUdeviceptr, size_t);
    CUresult (*dtod)(CUdeviceptr, CUdeviceptr, size_t);
    CUresult (*htod_async)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*dtoh_async)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*memset8)(CUdeviceptr, unsigned char, size_t);
    CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                       unsigned, CUstream, void **, void **);
    CUresult (*ctx_sync)(CUcontext); /* cuCtxSynchronize_v2, as version 13000 finds it */
    CUresult (*stream_sync)(CUstream);
    CUresult (*stream_create)(CUstream *, unsigned);
    CUresult (*stream_destroy)(CUstream);
    CUresult (*ctx_get_device)(CUdevice *, CUcontext); /* cuCtxGetDevice_v2, on first use */
} drv;

typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t,
                           CUdriverProcAddressQueryResult *);
/* cuGetProcAddress_v2, kept for the functions looked up on their first use. */
static gpa_fn gpa_saved;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static CUresult init_rc = CUDA_ERROR_NOT_INITIALIZED;
static CUcontext primary;
static __thread int current;

static void init(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) return;
    CUresult (*gpa)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) =
        (CUresult(*)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *))
            dlsym(h, "cuGetProcAddress_v2");
    if (!gpa) return;
    gpa_saved = gpa;
    struct { const char *name; void **slot; } fns[] = {
        {"cuInit", (void **)&drv.init},
        {"cuDeviceGet", (void **)&drv.device_get},
        {"cuDevicePrimaryCtxRetain", (void **)&drv.retain},
        {"cuCtxSetCurrent", (void **)&drv.set_current},
        {"cuMemAlloc", (void **)&drv.mem_alloc},
        {"cuMemFree", (void **)&drv.mem_free},
        {"cuMemcpyHtoD", (void **)&drv.htod},
        {"cuMemcpyDtoH", (void **)&drv.dtoh},
        {"cuMemcpyDtoD", (void **)&drv.dtod},
        {"cuMemcpyHtoDAsync", (void **)&drv.htod_async},
        {"cuMemcpyDtoHAsync", (void **)&drv.dtoh_async},
        {"cuMemsetD8", (void **)&drv.memset8},
        {"cuLaunchKernel", (void **)&drv.launch},
        {"cuCtxSynchronize", (void **)&drv.ctx_sync},
        {"cuStreamSynchronize", (void **)&drv.stream_sync},
        {"cuStreamCreate", (void **)&drv.stream_create},
        {"cuStreamDestroy", (void **)&drv.stream_destroy},
    };
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        CUdriverProcAddressQueryResult status;
        if (gpa(fns[i].name, fns[i].slot, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &status) !=
                CUDA_SUCCESS ||
            !*fns[i].slot)
            return;
    }
    CUdevice dev;
    CUresult rc = drv.init(0);
    if (rc == CUDA_SUCCESS) rc = drv.device_get(&dev, 0);
    if (rc == CUDA_SUCCESS) rc = drv.retain(&primary, dev);
    init_rc = rc;
}

/* The driver, initialised, with the primary context current on this thread. */
static CUresult ready(void) {
    pthread_once(&once, init);
    if (init_rc != CUDA_SUCCESS) return init_rc;
    if (!current) {
        CUresult rc = drv.set_current(primary);
        if (rc != CUDA_SUCCESS) return rc;
        current = 1;
    }
    return CUDA_SUCCESS;
}

#define DRIVER(call)                                    \
    do {                                                \
        CUresult rc_ = ready();                         \
        if (rc_ == CUDA_SUCCESS) rc_ = (call);          \
        END(to_runtime(rc_));                           \
    } while (0)

cudaError_t cudaMalloc(void **p, size_t size) {
    BEGIN(cudaMalloc_v3020);
    if (!p) END(cudaErrorInvalidValue);
    DRIVER(drv.mem_alloc((CUdeviceptr *)p, size));
}

cudaError_t cudaFree(void *p) {
    BEGIN(cudaFree_v3020);
    DRIVER(p ? drv.mem_free((CUdeviceptr)p) : CUDA_SUCCESS);
}

static CUresult copy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, CUstream s,
                     int async) {
    CUdeviceptr d = (CUdeviceptr)dst, from = (CUdeviceptr)src;
    switch (kind) {
    case cudaMemcpyHostToDevice:
        return async ? drv.htod_async(d, src, n, s) : drv.htod(d, src, n);
    case cudaMemcpyDeviceToHost:
        return async ? drv.dtoh_async(dst, from, n, s) : drv.dtoh(dst, from, n);
    case cudaMemcpyDeviceToDevice:
        return async ? CUDA_ERROR_NOT_SUPPORTED : drv.dtod(d, from, n);
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind) {
    BEGIN(cudaMemcpy_v3020);
    DRIVER(copy(dst, src, n, kind, NULL, 0));
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                            cudaStream_t stream) {
    BEGIN(cudaMemcpyAsync_v3020);
    DRIVER(copy(dst, src, n, kind, (CUstream)stream, 1));
}

cudaError_t cudaMemset(void *p, int value, size_t n) {
    BEGIN(cudaMemset_v3020);
    DRIVER(drv.memset8((CUdeviceptr)p, (unsigned char)value, n));
}

cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args,
                             size_t shared, cudaStream_t stream) {
    BEGIN(cudaLaunchKernel_v7000);
    DRIVER(drv.launch((CUfunction)func, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                      (unsigned)shared, (CUstream)stream, args, NULL));
}

cudaError_t cudaDeviceSynchronize(void) {
    BEGIN(cudaDeviceSynchronize_v3020);
    DRIVER(drv.ctx_sync(primary));
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    BEGIN(cudaStreamSynchronize_v3020);
    DRIVER(drv.stream_sync((CUstream)stream));
}

cudaError_t cudaStreamCreate(cudaStream_t *stream) {
    BEGIN(cudaStreamCreate_v3020);
    if (!stream) END(cudaErrorInvalidValue);
    DRIVER(drv.stream_create((CUstream *)stream, CU_STREAM_DEFAULT));
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    BEGIN(cudaStreamDestroy_v5050);
    DRIVER(drv.stream_destroy((CUstream)stream));
}

/* The current context's device, asked of the driver as CUDA 13's runtime does (one
 * cuCtxGetDevice_v2 of the current context, looked up on the first call, so that programs that
 * never call it look up what they did before; PyTorch calls it around every operation). */
static CUresult ctx_get_device(CUdevice *device) {
    CUresult (*f)(CUdevice *, CUcontext) =
        __atomic_load_n(&drv.ctx_get_device, __ATOMIC_ACQUIRE);
    if (!f) {
        CUdriverProcAddressQueryResult status;
        void *p = NULL;
        if (gpa_saved("cuCtxGetDevice", &p, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &status) !=
                CUDA_SUCCESS ||
            !p)
            return CUDA_ERROR_NOT_FOUND;
        f = (CUresult(*)(CUdevice *, CUcontext))p;
        __atomic_store_n(&drv.ctx_get_device, f, __ATOMIC_RELEASE);
    }
    return f(device, NULL);
}

cudaError_t cudaGetDevice(int *device) {
    BEGIN(cudaGetDevice_v3020);
    if (!device) END(cudaErrorInvalidValue);
    DRIVER(ctx_get_device((CUdevice *)device));
}

/* The runtime's version, SIMCUDART_VERSION (13000 unless the build says otherwise: the tests
 * build a second runtime, libcudart.so.12, answering 12000). No driver call. */
#ifndef SIMCUDART_VERSION
#define SIMCUDART_VERSION 13000
#endif
cudaError_t cudaRuntimeGetVersion(int *version) {
    BEGIN(cudaRuntimeGetVersion_v3020);
    if (!version) END(cudaErrorInvalidValue);
    *version = SIMCUDART_VERSION;
    END(cudaSuccess);
}

/* No driver call: the runtime keeps the last error itself (always none here). */
cudaError_t cudaGetLastError(void) {
    BEGIN(cudaGetLastError_v3020);
    END(cudaSuccess);
}
