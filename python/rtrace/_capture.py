"""Capture control and external correlation ids, through the traced process's own librtrace.so.

Under rtrace, librtrace.so is preloaded: its exports are among the process's global symbols
(``ctypes.CDLL(None)``), the C ABI of ``inject/rtrace.h`` for external correlation ids among
them. Capture control is the driver's ``cuProfilerStart``/``cuProfilerStop`` (what
``cudaProfilerStart`` and ``torch.cuda.profiler.start`` call), looked up on the driver's handle
(``libcuda.so.1``), which librtrace.so answers with its wrappers: rtrace opens or closes its
capture range and records the call. Without librtrace.so, each call here does nothing and the
first one says so with a warning.
"""

import contextlib
import ctypes
import os
import threading
import warnings

# CUPTI's CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0 (cupti_activity.h), as a C or C++ extension
# using rtrace.h names it; any number of 32 bits will do.
CUSTOM0 = 3


def _checked(value, kind):
    """`value` and `kind` as the C ABI takes them (ids of 64 bits, kinds of 32), the same
    traced or not: a TypeError or ValueError otherwise, never a silent wrap."""
    for name, v, bits in (("id", value, 64), ("kind", kind, 32)):
        if isinstance(v, bool) or not hasattr(v, "__index__"):
            raise TypeError(
                f"rtrace: an external correlation {name} is an integer, not {type(v).__name__}"
            )
        if not 0 <= v.__index__() < 1 << bits:
            raise ValueError(
                f"rtrace: an external correlation {name} is 0 to 2**{bits} - 1, not {v}"
            )
    return value.__index__(), kind.__index__()

_lock = threading.Lock()
_correlation = None  # (push, pop), or () when not under rtrace
_profiler = None  # (cuProfilerStart, cuProfilerStop), or () without a driver
_warned = set()


def _load():
    """librtrace.so's external correlation functions, looked up once; () when it is not
    loaded."""
    global _correlation
    with _lock:
        if _correlation is not None:
            return _correlation
        process = ctypes.CDLL(None)
        try:
            push = process.rtrace_push_external_correlation
            pop = process.rtrace_pop_external_correlation
        except AttributeError:
            _correlation = ()
            return _correlation
        push.argtypes = [ctypes.c_uint32, ctypes.c_uint64]
        push.restype = ctypes.c_int
        pop.argtypes = [ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint64)]
        pop.restype = ctypes.c_int
        _correlation = (push, pop)
        return _correlation


def _driver():
    """The driver's cuProfilerStart and cuProfilerStop (librtrace.so's wrappers, under rtrace),
    looked up once, when capture control is first used; () without a driver."""
    global _profiler
    with _lock:
        if _profiler is not None:
            return _profiler
        try:
            driver = ctypes.CDLL("libcuda.so.1")
            functions = (driver.cuProfilerStart, driver.cuProfilerStop)
        except (OSError, AttributeError):
            _profiler = ()
            return _profiler
        for f in functions:
            f.argtypes = []
            f.restype = ctypes.c_int
        _profiler = functions
        return _profiler


def _say_once(key, message, stacklevel):
    """Warns with `message` the first time `key` comes up (`stacklevel` as warnings.warn's,
    counted from our caller, so that the warning names the user's line)."""
    with _lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(message, RuntimeWarning, stacklevel=stacklevel + 1)


def _not_traced(what):
    _say_once(
        "not-traced",
        f"rtrace.{what}: not running under rtrace (librtrace.so is not loaded): "
        "rtrace's calls do nothing; run the program with `rtrace record -- python3 ...`",
        stacklevel=3,
    )


def under_rtrace():
    """Whether this process runs under rtrace (librtrace.so is loaded)."""
    return bool(_load())


def _capture_range_off():
    value = os.environ.get("RTRACE_CAPTURE_RANGE", "").strip()
    return value not in ("cudaProfilerApi", "cuProfilerApi", "profiler")


def start():
    """Starts recording: calls ``cuProfilerStart`` through librtrace.so.

    With ``rtrace record --capture-range cudaProfilerApi`` rtrace records only between
    ``start()`` and ``stop()`` (as often as they are called); without it everything is recorded
    and a warning says so once. Returns the driver's result code (0: success), or None when
    not under rtrace.
    """
    if not _load():
        _not_traced("start")
        return None
    if _capture_range_off():
        _say_once(
            "no-capture-range",
            "rtrace.start: recording the whole run: give `rtrace record --capture-range "
            "cudaProfilerApi` to record only between rtrace.start() and rtrace.stop()",
            stacklevel=2,
        )
    return _profiler_call(0, "start")


def _profiler_call(which, what):
    functions = _driver()
    if not functions:
        _say_once(
            "no-driver",
            f"rtrace.{what}: no CUDA driver (libcuda.so.1) to call: capture control does nothing",
            stacklevel=3,
        )
        return None
    return functions[which]()


def stop():
    """Stops recording: calls ``cuProfilerStop`` through librtrace.so (see `start`)."""
    if not _load():
        _not_traced("stop")
        return None
    return _profiler_call(1, "stop")


def push_external_id(value, kind=CUSTOM0):
    """Pushes external correlation id `value` of `kind` on the calling thread: the CUDA calls
    the thread makes until the matching pop, and the GPU work they launch, are linked to it."""
    value, kind = _checked(value, kind)
    symbols = _load()
    if not symbols:
        _not_traced("push_external_id")
        return
    symbols[0](kind, value)


def pop_external_id(kind=CUSTOM0):
    """Pops the innermost id of `kind` on the calling thread and returns it (None when none
    was pushed, or when not under rtrace)."""
    _, kind = _checked(0, kind)
    symbols = _load()
    if not symbols:
        _not_traced("pop_external_id")
        return None
    popped = ctypes.c_uint64()
    if symbols[1](kind, ctypes.byref(popped)) != 0:
        return None
    return popped.value


@contextlib.contextmanager
def external_id(value, kind=CUSTOM0):
    """``with rtrace.external_id(step):`` links the CUDA calls made inside on this thread,
    and the GPU work they launch, to `step` (`rtrace report` lists the GPU time per id)."""
    push_external_id(value, kind)
    try:
        yield value
    finally:
        pop_external_id(kind)
