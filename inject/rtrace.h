/* rtrace.h: what librtrace.so exports for programs to call.
 *
 * External correlation, like CUPTI's cuptiActivityPushExternalCorrelationId: push an id of
 * your own (an operator, a layer, a request) on the calling thread; every CUDA driver call the
 * thread makes until the matching pop is linked to the innermost id of each kind, and through
 * the call so is the GPU work it launched. `rtrace report` gives the GPU time per id.
 *
 * The functions exist only while librtrace.so is loaded (LD_PRELOAD): look them up with
 * dlsym(RTLD_DEFAULT, "rtrace_push_external_correlation") so that the program also runs
 * without rtrace. Thread-safe; each thread has its own stacks, one per kind.
 */
#ifndef RTRACE_H
#define RTRACE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Pushes `id` of kind `kind` (any number; CUPTI's CUpti_ExternalCorrelationKind values are
 * a good choice) on the calling thread. Returns 0. */
int rtrace_push_external_correlation(uint32_t kind, uint64_t id);

/* Pops the innermost id of kind `kind` on the calling thread into *id (if id is not NULL).
 * Returns 0, or -1 when no id of that kind is pushed on this thread. */
int rtrace_pop_external_correlation(uint32_t kind, uint64_t *id);

typedef int (*rtrace_push_external_correlation_fn)(uint32_t kind, uint64_t id);
typedef int (*rtrace_pop_external_correlation_fn)(uint32_t kind, uint64_t *id);

#ifdef __cplusplus
}
#endif

#endif
