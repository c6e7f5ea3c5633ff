/* rtrace gen-wrappers shim: the EGL types cudaEGL.h uses (only their ABI matters). */
#ifndef RTRACE_SHIM_EGL_H
#define RTRACE_SHIM_EGL_H
#include <stdint.h>
typedef int32_t EGLint;
typedef void *EGLDisplay;
typedef void *EGLSync;
typedef void *EGLImage;
#endif
