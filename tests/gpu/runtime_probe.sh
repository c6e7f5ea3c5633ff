#!/usr/bin/env bash
# Runtime API records on the GPU machine (docs/runtime-api.md, "What to check on a GPU"): for
# vector_add (shared and static cudart), tests/gpu/pytorch_step.py and a CuPy loop, three runs
# each: CUPTI's runtime-domain counter alone (cupti_counter.so, CUPTI_COUNT_DOMAIN=runtime),
# rtrace alone (GPU activity on, runtime API records on by default), and both in one process;
# then tests/gpu/runtime_check.py on the traces: counts per runtime callback id against the
# counter of the same process, one cuLaunchKernel inside each cudaLaunchKernel, and which
# layer's call the GPU records are linked to. Run from a copy of the repository carrying
# target/release/librtrace.so and target/release/rtrace:
#     OUT=/some/dir bash tests/gpu/runtime_probe.sh
# ROUTE=interpose (or cupti) runs rtrace with RTRACE_RUNTIME_API=ROUTE: the runtime calls by
# rtrace's own exports of libcudart's functions instead of CUPTI's runtime callbacks.
# Lines "PASS/FAIL runtime.<check> (...)" per program and run; the last line "N failed".
set -u
cd "$(dirname "$0")/../.." || exit 2
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda-13.0}
PY=${PYTHON:-python3}
LIB=$PWD/target/release/librtrace.so
OUT=${OUT:-$PWD/gpu-out/runtime}
mkdir -p "$OUT" && rm -rf "${OUT:?}"/run-* "$OUT/bin"
BIN=$OUT/bin && mkdir -p "$BIN"
unset LD_PRELOAD CUDA_INJECTION64_PATH NVTX_INJECTION64_PATH
for v in $(compgen -e); do case $v in RTRACE_* | CUPTI_COUNT_*) unset "$v" ;; esac; done
INC=$CUDA_HOME/targets/x86_64-linux/include
CLIB=$CUDA_HOME/targets/x86_64-linux/lib
HEADER=$INC/cupti_runtime_cbid.h
FAILED=0
gcc -shared -fPIC -O2 -Wall -o "$BIN/cupti_counter.so" tests/gpu/cupti_counter.c -I"$INC" \
    -L"$CLIB" -l:libcupti.so.13 -Wl,-rpath,"$CLIB" || exit 2
arch=(-gencode "arch=compute_90,code=sm_90")
"$CUDA_HOME/bin/nvcc" -O2 "${arch[@]}" -cudart shared -Xlinker -rpath -Xlinker "$CUDA_HOME/lib64" \
    -o "$BIN/vector_add" samples/vector_add.cu || exit 2
"$CUDA_HOME/bin/nvcc" -O2 "${arch[@]}" -o "$BIN/vector_add_static" samples/vector_add.cu || exit 2
cat >"$BIN/cupy_loop.py" <<'PYEOF'
import cupy as cp
x = cp.ones(1 << 20, dtype=cp.float32)
for _ in range(200):
    x = x * 1.0001 + 1
cp.cuda.runtime.deviceSynchronize()
print("cupy:", float(x[0]) > 0)
PYEOF

run_one() { # label mode command...
    local label=$1 mode=$2
    shift 2
    local dir=$OUT/run-$label-$mode && mkdir -p "$dir"
    local env_=()
    case $mode in
    counter) env_=(CUDA_INJECTION64_PATH="$BIN/cupti_counter.so" CUPTI_COUNT_DOMAIN=runtime CUPTI_COUNT_OUTPUT="$dir/rt") ;;
    rtrace) env_=(LD_PRELOAD="$LIB" RTRACE_GPU_ACTIVITY=1 RTRACE_OUTPUT="$dir/t-%p.bin" ${ROUTE:+RTRACE_RUNTIME_API=$ROUTE}) ;;
    both) env_=(LD_PRELOAD="$LIB" RTRACE_GPU_ACTIVITY=1 RTRACE_OUTPUT="$dir/t-%p.bin" ${ROUTE:+RTRACE_RUNTIME_API=$ROUTE}
        CUDA_INJECTION64_PATH="$BIN/cupti_counter.so" CUPTI_COUNT_DOMAIN=runtime CUPTI_COUNT_OUTPUT="$dir/rt") ;;
    esac
    env "${env_[@]}" timeout 300 "$@" >"$dir/stdout" 2>"$dir/stderr"
    echo "== $label $mode: exit $? $(tail -1 "$dir/stdout")"
}

check() { # label: compares the "both" run, then the separate runs
    local label=$1
    local d=$OUT/run-$label
    echo "== $label: counter and rtrace in one process"
    "$PY" tests/gpu/runtime_check.py --cbid-header "$HEADER" --cupti "$d-both"/rt.* -- "$d-both"/t-*.bin \
        | tee "$d-both/check.txt" | sed 's/^/    /'
    tail -1 "$d-both/check.txt" | grep -q '^0 failed' || FAILED=$((FAILED + 1))
    echo "== $label: counter and rtrace in separate runs (a difference may be the program's own)"
    "$PY" tests/gpu/runtime_check.py --cbid-header "$HEADER" --cupti "$d-counter"/rt.* -- "$d-rtrace"/t-*.bin \
        | tee "$d-rtrace/check.txt" | sed 's/^/    /'
    target/release/rtrace report "$d-rtrace"/t-*.bin >"$d-rtrace/report.txt" 2>&1
}

for prog in vector_add vector_add_static; do
    for mode in counter rtrace both; do run_one "$prog" "$mode" "$BIN/$prog"; done
    check "$prog"
done
for mode in counter rtrace both; do run_one torch "$mode" "$PY" tests/gpu/pytorch_step.py; done
check torch
if "$PY" -c 'import cupy' 2>/dev/null; then
    for mode in counter rtrace both; do run_one cupy "$mode" "$PY" "$BIN/cupy_loop.py"; done
    check cupy
fi
echo "$FAILED failed"
[ "$FAILED" -eq 0 ]
