#!/usr/bin/env bash
# The main job on a bundled sample: builds rtrace (the debug profile, which tools/test.sh then
# reuses), compiles samples/driver_api.c, runs it under `rtrace record --gpu-activity`, prints
# `rtrace report` (API calls, then the GPU kernels, copies and resources) and exports the trace
# for Perfetto. The trace, its Perfetto file and the sample stay in rtrace-demo/ (the previous
# run's are replaced). On a machine with an NVIDIA driver it runs on the real GPU (and its
# CUPTI); elsewhere on the simulated driver and CUPTI (tests/simcuda, tests/simcupti), with the
# simulator's clock following real time (SIMCUDA_CLOCK=real).
set -euo pipefail
cd "$(dirname "$0")/.."
step() { echo "demo: $*" >&2; }

# CUDA headers: the toolkit's where there is one, else cuda.h from PyPI (tools/setup-cuda.sh).
if [ -f /usr/local/cuda/include/cuda.h ]; then
    inc=/usr/local/cuda/include
else
    step "fetching cuda.h (nvidia-cuda-runtime, 2 MB) into .venv/"
    inc="$(tools/setup-cuda.sh demo)"
fi

target="${CARGO_TARGET_DIR:-target}"
if command -v cargo >/dev/null; then
    step "building rtrace, librtrace.so and the simulated driver (cargo build --workspace; the first build takes a few minutes)"
    cargo build --workspace
    bin="$target/debug"
else
    # A machine without Rust (a GPU machine) uses the build carried to it.
    for bin in "$target/release" "$target/debug" ""; do
        [ -n "$bin" ] && [ -x "$bin/rtrace" ] && [ -f "$bin/librtrace.so" ] && break
    done
    if [ -z "$bin" ]; then
        echo "demo: no cargo, and no rtrace and librtrace.so in $target/release or $target/debug" >&2
        exit 1
    fi
fi

out="$PWD/rtrace-demo"
rm -rf "$out"
mkdir -p "$out"
if nvidia-smi -L >/dev/null 2>&1; then
    step "NVIDIA GPU found: tracing on the real driver"
    # Link against the toolkit's stub when the driver ships no unversioned libcuda.so.
    stubs=()
    for d in /usr/local/cuda/lib64/stubs /usr/local/cuda/targets/x86_64-linux/lib/stubs; do
        [ -e "$d/libcuda.so" ] && stubs=(-L"$d") && break
    done
    gcc -O2 -I"$inc" samples/driver_api.c -o "$out/driver_api" "${stubs[@]}" -lcuda
else
    step "no GPU: tracing on the simulated driver (tests/simcuda, tests/simcupti)"
    mkdir -p "$out/lib"
    cp "$bin/libcuda.so" "$out/lib/libcuda.so.1"
    ln -s libcuda.so.1 "$out/lib/libcuda.so"
    cp "$bin/libcupti.so" "$out/lib/libcupti.so.13"
    gcc -O2 -I"$inc" samples/driver_api.c -o "$out/driver_api" -L"$out/lib" -lcuda
    export LD_LIBRARY_PATH="$out/lib" RTRACE_SIMULATED=1 SIMCUDA_CLOCK=real
fi

step "rtrace record --gpu-activity -- samples/driver_api"
"$bin/rtrace" record --gpu-activity --output "$out/trace-%p.bin" -- "$out/driver_api"
traces=("$out"/trace-*.bin)
step "rtrace report ${traces[*]#"$PWD/"}"
"$bin/rtrace" report "${traces[@]}"
step "rtrace export --format perfetto"
"$bin/rtrace" export --format perfetto -o "$out/trace.pftrace" "${traces[@]}"
rel() { echo "${1#"$PWD/"}"; }
{
    echo
    echo "demo: kept in $(rel "$out")/:"
    printf '  %-16s %s\n' "$(basename "${traces[0]}")" "the trace: $(rel "$bin")/rtrace report $(rel "${traces[0]}")"
    printf '  %-16s %s\n' trace.pftrace "its timeline (rtrace export --format perfetto): open it in https://ui.perfetto.dev"
} >&2
