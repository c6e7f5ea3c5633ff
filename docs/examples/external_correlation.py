"""External correlation ids from Python through librtrace.so's C ABI (inject/rtrace.h).

Under rtrace (`rtrace record -- python3 this.py`, or LD_PRELOAD=librtrace.so), every CUDA
driver call made inside `with external_id(n):` is linked to id n, and through the call so is
the GPU work it launched; `rtrace report` lists the GPU time per id. Without rtrace the ids
are no-ops.
"""
import ctypes

_lib = ctypes.CDLL(None)  # the process's global symbols: librtrace.so's when it is preloaded
try:
    _push = _lib.rtrace_push_external_correlation
    _pop = _lib.rtrace_pop_external_correlation
    _push.argtypes = [ctypes.c_uint32, ctypes.c_uint64]
    _push.restype = ctypes.c_int
    _pop.argtypes = [ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint64)]
    _pop.restype = ctypes.c_int
except AttributeError:  # not running under rtrace
    _push = _pop = None

CUSTOM0 = 2  # CUPTI's CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0; any number will do


class external_id:
    """`with external_id(step):` links the calls made inside to `step`."""

    def __init__(self, value, kind=CUSTOM0):
        self.value, self.kind = value, kind

    def __enter__(self):
        if _push:
            _push(self.kind, self.value)
        return self

    def __exit__(self, *exc):
        if _pop:
            popped = ctypes.c_uint64()
            _pop(self.kind, ctypes.byref(popped))
        return False


if __name__ == "__main__":
    # A demonstration that needs no GPU: the ids are recorded even with no driver call inside.
    for step in range(3):
        with external_id(100 + step):
            pass
    print("under rtrace" if _push else "not under rtrace")
