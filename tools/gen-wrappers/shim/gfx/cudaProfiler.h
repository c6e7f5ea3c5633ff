/* rtrace gen-wrappers shim: the profiler API, found only where the CUDA include directory lacks the
 * real cudaProfiler.h (the nvidia-cuda-runtime wheel ships cudaProfilerTypedefs.h without it).
 * Declared from the CUDA driver API documentation; gen.py checks these prototypes against the
 * PFN_cuProfiler*_v4000 typedefs of cudaProfilerTypedefs.h. */
#ifndef RTRACE_SHIM_CUDAPROFILER_H
#define RTRACE_SHIM_CUDAPROFILER_H
#include <cuda.h>

typedef enum CUoutput_mode_enum {
    CU_OUT_KEY_VALUE_PAIR = 0x00,
    CU_OUT_CSV = 0x01
} CUoutput_mode;

CUresult CUDAAPI cuProfilerInitialize(const char *configFile, const char *outputFile, CUoutput_mode outputMode);
CUresult CUDAAPI cuProfilerStart(void);
CUresult CUDAAPI cuProfilerStop(void);
#endif
