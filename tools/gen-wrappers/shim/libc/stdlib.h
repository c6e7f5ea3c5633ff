/* rtrace gen-wrappers shim: cuda.h includes <stdlib.h> only for size_t. */
#ifndef RTRACE_SHIM_STDLIB_H
#define RTRACE_SHIM_STDLIB_H
#include <stddef.h>
#endif
