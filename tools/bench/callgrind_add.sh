#!/usr/bin/env bash
# rtrace's own instructions per op of PyTorch's `x.add_(1)` call pattern, without a GPU:
# tools/bench/torch_add_sim.c (6 runtime and 5 driver calls an op, one kernel) on the simulated
# runtime, driver and CUPTI, recorded by `rtrace record` in its default mode under
# `valgrind --tool=callgrind --separate-threads=yes --trace-children=yes --fair-sched=yes
# --collect-systime=yes` (fair scheduling: else the program's thread can hold valgrind's lock
# until its ring is full, and the worker is measured doing less than it does),
# twice (OPS/4 and OPS ops: the difference leaves start-up and exit out); then, per thread,
# instructions per op by object and by rtrace's function groups (tools/bench/callgrind_split.py),
# and, from a run without valgrind, each thread's context switches per op during the loop.
#
# Usage: tools/bench/callgrind_add.sh [OPS]   (default 200000)
# Environment: LIB (the librtrace.so to measure; default this build's), CUDA_INCLUDE (else
# tools/setup-cuda.sh test), CARGO_TARGET_DIR, OUTDIR (kept: the callgrind files and the traces;
# default a temporary directory, removed), RTRACE_ARGS (more `rtrace record` options).
set -euo pipefail
cd "$(dirname "$0")/../.."
OPS=${1:-200000}
inc=${CUDA_INCLUDE:-$(tools/setup-cuda.sh test)}
target=${CARGO_TARGET_DIR:-$PWD/target}
cargo build --release -q -p rtrace-inject -p rtrace-collector -p simcuda -p simcupti
if [ -n "${OUTDIR:-}" ]; then
    work=$OUTDIR
    mkdir -p "$work"
else
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work/lib"
ln -sf "$target/release/libcuda.so" "$work/lib/libcuda.so.1"
ln -sf "$target/release/libcuda.so" "$work/lib/libcuda.so"
ln -sf "$target/release/libcupti.so" "$work/lib/libcupti.so.13"
gcc -O2 -shared -fPIC -Wl,-soname,libcudart.so.13 -I"$inc" tests/programs/simcudart.c \
    -o "$work/lib/libcudart.so.13" -ldl -pthread
ln -sf libcudart.so.13 "$work/lib/libcudart.so"
gcc -O2 -I"$inc" tools/bench/torch_add_sim.c -o "$work/torch_add_sim" -L"$work/lib" -lcudart -lcuda
export LD_LIBRARY_PATH="$work/lib"
rtrace=$target/release/rtrace
export RTRACE_LIB=${LIB:-$target/release/librtrace.so}
# Two runs, of OPS/4 and OPS ops: their difference is what the ops cost, start-up and exit left
# out. The program's threads are the files whose command is the program (the CLI's are others).
small=$((OPS / 4))
for n in "$small" "$OPS"; do
    rm -rf "$work/cg-$n"
    mkdir -p "$work/cg-$n"
    # shellcheck disable=SC2086
    valgrind -q --tool=callgrind --separate-threads=yes --trace-children=yes --fair-sched=yes \
        --collect-systime=yes --callgrind-out-file="$work/cg-$n/callgrind.out.%p" \
        "$rtrace" record ${RTRACE_ARGS:-} -o "$work/cg-$n/t.bin" -- "$work/torch_add_sim" "$n" \
        >"$work/cg-$n/out.txt" 2>&1 || { cat "$work/cg-$n/out.txt"; exit 1; }
    # A lost record is work the worker did not do: the counts would flatter the build.
    "$rtrace" report "$work/cg-$n/t.bin" 2>&1 | grep -q '^  dropped records *0$' ||
        echo "WARNING: the run of $n ops lost records: its counts are not comparable"
done
echo "== callgrind: per op, the run of $OPS ops less the run of $small (rtrace record ${RTRACE_ARGS:-})"
python3 tools/bench/callgrind_split.py \
    "$small" $(grep -l '^cmd: *[^ ]*torch_add_sim' "$work/cg-$small"/callgrind.out.*) -- \
    "$OPS" $(grep -l '^cmd: *[^ ]*torch_add_sim' "$work/cg-$OPS"/callgrind.out.*)
rm -f "$work"/t-run*.bin
# shellcheck disable=SC2086
"$rtrace" record ${RTRACE_ARGS:-} -o "$work/t-run.bin" -- "$work/torch_add_sim" "$OPS" >"$work/run.txt" 2>&1
echo "== without valgrind: context switches per op during the loop"
awk -v ops="$OPS" '/^thread /{printf "   %-16s vcsw/op %.5f  ivcsw/op %.5f  (%d, %d)\n", $2, $4/ops, $6/ops, $4, $6}' "$work/run.txt"
echo "== the trace"
"$rtrace" report "$work/t-run.bin" 2>&1 | sed -n "/API records/p;/dropped records/p;/GPU records/p" | head -3
