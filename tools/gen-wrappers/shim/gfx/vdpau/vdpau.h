/* rtrace gen-wrappers shim: the VDPAU types cudaVDPAU.h uses, as vdpau.h declares them
 * (only their ABI matters). */
#ifndef RTRACE_SHIM_VDPAU_H
#define RTRACE_SHIM_VDPAU_H
#include <stdint.h>
typedef uint32_t VdpDevice;
typedef uint32_t VdpFuncId;
typedef uint32_t VdpChromaType;
typedef uint32_t VdpRGBAFormat;
typedef uint32_t VdpVideoSurface;
typedef uint32_t VdpOutputSurface;
typedef enum { VDP_STATUS_OK = 0 } VdpStatus;
typedef VdpStatus VdpGetProcAddress(VdpDevice device, VdpFuncId function_id, void **function_pointer);
#endif
