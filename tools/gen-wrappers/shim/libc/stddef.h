/* rtrace gen-wrappers shim: the parts of <stddef.h> the CUDA headers use.
 * The generator parses with -nostdinc so that its output does not depend on the host's C library;
 * the types come from the compiler's predefined macros for the target (x86-64 Linux). */
#ifndef RTRACE_SHIM_STDDEF_H
#define RTRACE_SHIM_STDDEF_H
typedef __SIZE_TYPE__ size_t;
typedef __PTRDIFF_TYPE__ ptrdiff_t;
typedef __WCHAR_TYPE__ wchar_t;
#define NULL ((void *)0)
#define offsetof(type, member) __builtin_offsetof(type, member)
#endif
