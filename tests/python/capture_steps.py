"""Run under `rtrace record --capture-range cudaProfilerApi` by tests/harness/tests/wheel.rs,
against the simulated driver (tests/simcuda), with the rtrace wheel installed: three steps of
two kernel launches, each step inside `rtrace.external_id(100 + step)`, between rtrace.start()
and rtrace.stop(), and one launch before the start (one more, and a cuInit, inside id 99) and
one after the stop (not recorded); then id 200 pushed while recording is paused, a range with
a launch inside it, id 200 popped while paused, and a range with a launch outside any id.
Prints what the package says, for the test to compare."""

import ctypes
import sys
import warnings

import rtrace

cuda = ctypes.CDLL("libcuda.so.1")
IMAGE = b"simcuda-module\nkernel step_kernel 2000\n"


def check(rc, what):
    if rc != 0:
        sys.exit(f"{what} returned {rc}")


def launch(function):
    check(
        cuda.cuLaunchKernel(
            function, 4, 1, 1, 128, 1, 1, 0, None, None, None
        ),
        "cuLaunchKernel",
    )


ctx, module, function = (ctypes.c_void_p() for _ in range(3))
device = ctypes.c_int()
check(cuda.cuInit(0), "cuInit")
check(cuda.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
check(cuda.cuCtxCreate_v2(ctypes.byref(ctx), 0, device), "cuCtxCreate_v2")
check(cuda.cuModuleLoadData(ctypes.byref(module), IMAGE), "cuModuleLoadData")
check(
    cuda.cuModuleGetFunction(ctypes.byref(function), module, b"step_kernel"),
    "cuModuleGetFunction",
)
launch(function)  # before the capture range: not recorded
with rtrace.external_id(99):  # a warm-up step, wholly before it: not reported
    check(cuda.cuInit(0), "cuInit")  # as a library initialising itself: recorded, no id's
    launch(function)

with warnings.catch_warnings(record=True) as said:
    warnings.simplefilter("always")
    print("under rtrace:", rtrace.under_rtrace())
    print("start:", rtrace.start())
    for step in range(3):
        with rtrace.external_id(100 + step) as value:
            launch(function)
            launch(function)
        print("step", value)
    check(cuda.cuCtxSynchronize(), "cuCtxSynchronize")
    print("stop:", rtrace.stop())
    print("pop with nothing pushed:", rtrace.pop_external_id())
    # An id pushed while recording is paused credits the calls recorded inside it; one popped
    # while paused credits none after it.
    with rtrace.external_id(200):
        rtrace.start()
        launch(function)
        check(cuda.cuCtxSynchronize(), "cuCtxSynchronize")
        rtrace.stop()
    rtrace.start()
    launch(function)
    check(cuda.cuCtxSynchronize(), "cuCtxSynchronize")
    rtrace.stop()
print("warnings:", len(said))

launch(function)  # after the capture range: not recorded
check(cuda.cuCtxSynchronize(), "cuCtxSynchronize")
check(cuda.cuCtxDestroy_v2(ctx), "cuCtxDestroy_v2")
