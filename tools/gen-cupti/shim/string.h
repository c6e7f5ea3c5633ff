/* rtrace gen-cupti shim: cupti_callbacks.h includes <string.h> but declares nothing with it. */
#ifndef RTRACE_SHIM_STRING_H
#define RTRACE_SHIM_STRING_H
#include <stddef.h>
#endif
