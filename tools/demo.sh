#!/usr/bin/env bash
# The main job on a bundled sample: builds rtrace, compiles samples/driver_api.c, runs it under
# `rtrace record --gpu-activity` and prints `rtrace report` (API calls, then the GPU kernels,
# copies and resources). On a machine with an NVIDIA driver it runs on the real GPU (and its
# CUPTI); elsewhere on the simulated driver and CUPTI (tests/simcuda, tests/simcupti).
set -euo pipefail
cd "$(dirname "$0")/.."
# CUDA headers: the toolkit's where there is one, else the PyPI wheels (tools/setup-cuda.sh).
if [ -f /usr/local/cuda/include/cuda.h ]; then
    inc=/usr/local/cuda/include
else
    inc="$(tools/setup-cuda.sh)"
fi
# A machine without Rust (a GPU machine) uses the release build carried to it.
if command -v cargo >/dev/null; then
    cargo build --release -q -p rtrace-inject -p rtrace-collector -p simcuda -p simcupti
elif [ ! -x target/release/rtrace ] || [ ! -f target/release/librtrace.so ]; then
    echo "demo: no cargo, and no target/release/rtrace and librtrace.so to use" >&2
    exit 1
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if nvidia-smi -L >/dev/null 2>&1; then
    echo "demo: NVIDIA GPU found: tracing on the real driver" >&2
    # Link against the toolkit's stub when the driver ships no unversioned libcuda.so.
    stubs=()
    for d in /usr/local/cuda/lib64/stubs /usr/local/cuda/targets/x86_64-linux/lib/stubs; do
        [ -e "$d/libcuda.so" ] && stubs=(-L"$d") && break
    done
    gcc -O2 -I"$inc" samples/driver_api.c -o "$work/driver_api" "${stubs[@]}" -lcuda
else
    echo "demo: no GPU: tracing on the simulated driver (tests/simcuda)" >&2
    mkdir -p "$work/lib"
    cp target/release/libcuda.so "$work/lib/libcuda.so.1"
    ln -s libcuda.so.1 "$work/lib/libcuda.so"
    cp target/release/libcupti.so "$work/lib/libcupti.so.13"
    gcc -O2 -I"$inc" samples/driver_api.c -o "$work/driver_api" -L"$work/lib" -lcuda
    export LD_LIBRARY_PATH="$work/lib" RTRACE_SIMULATED=1
fi
target/release/rtrace record --gpu-activity --output "$work/trace-%p.bin" -- "$work/driver_api"
target/release/rtrace report "$work"/trace-*.bin
