/* rtrace gen-wrappers shim: the EGL extension types cudaEGL.h uses (only their ABI matters). */
#ifndef RTRACE_SHIM_EGLEXT_H
#define RTRACE_SHIM_EGLEXT_H
#include <EGL/egl.h>
typedef void *EGLImageKHR;
typedef void *EGLStreamKHR;
typedef void *EGLSyncKHR;
#endif
