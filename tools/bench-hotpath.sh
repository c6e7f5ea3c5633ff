#!/usr/bin/env bash
# Hot-path overhead benchmark, side by side in one run on the simulated driver.
#
# Runs tools/bench/hotpath.c (a loop of cuDriverGetVersion, which the simulated
# driver answers without locking) untraced, traced (time-stamp counter, the
# default where the kernel's clocksource is tsc), traced with
# RTRACE_CLOCK=monotonic (clock_gettime on every call), with RTRACE_DISABLE=1, and paused
# (RTRACE_CAPTURE_RANGE=cudaProfilerApi, never started: outside a capture range),
# alternating (the order rotating each pass), PAIRS times each; every process times ROUNDS
# rounds of CALLS calls.
# Prints the median ns per call of each mode and the median added by tracing.
#
# Usage: tools/bench-hotpath.sh [PAIRS] [CALLS] [ROUNDS]
# Environment: BENCH_DRIVER=system runs against the machine's real libcuda.so.1 instead of
# the simulated driver; NO_BUILD=1 uses the target/release artifacts as they are (on the GPU
# machine, which has no Rust) with the headers in $CUDA_INCLUDE. OLD_LIB=path/to/librtrace.so
# (another build, say the one before a change) adds its traced, disabled and NVTX modes to the
# same alternation, so the two builds are compared side by side in one run.
set -euo pipefail
cd "$(dirname "$0")/.."
PAIRS=${1:-9}
CALLS=${2:-200000}
ROUNDS=${3:-5}
DRIVER=${BENCH_DRIVER:-sim}

if [ "${NO_BUILD:-0}" = 1 ]; then
    inc=${CUDA_INCLUDE:?set CUDA_INCLUDE}
else
    inc=$(tools/setup-cuda.sh)
    cargo build --release -q -p rtrace-inject -p simcuda -p rtrace-collector
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ "$DRIVER" = sim ]; then
    mkdir -p "$work/lib"
    cp target/release/libcuda.so "$work/lib/libcuda.so.1"
    ln -s libcuda.so.1 "$work/lib/libcuda.so"
    gcc -O2 -I"$inc" tools/bench/hotpath.c -L"$work/lib" -lcuda -ldl -o "$work/hotpath"
    export LD_LIBRARY_PATH="$work/lib"
else
    gcc -O2 -I"$inc" tools/bench/hotpath.c -o "$work/hotpath" -L"${CUDA_STUBS:-/usr/local/cuda/lib64/stubs}" -lcuda -ldl
fi
lib=$PWD/target/release/librtrace.so
# Large enough that the benchmark loses nothing: it measures recording, not dropping.
buffer=$((1 << 21))
# Untimed calls first, more than a buffer holds: the timed rounds measure recording, not a
# buffer's first lap through fresh pages of the trace file (rtrace's rings are pages of it).
export HOTPATH_WARMUP=$((buffer + 4096))

run() { # mode -> ns-per-call lines
    case $1 in
    untraced) "$work/hotpath" "$CALLS" "$ROUNDS" ;;
    traced) RTRACE_BUFFER_RECORDS=$buffer RTRACE_OUTPUT="$work/t-%p.bin" LD_PRELOAD=$lib "$work/hotpath" "$CALLS" "$ROUNDS" ;;
    traced-monotonic) RTRACE_CLOCK=monotonic RTRACE_BUFFER_RECORDS=$buffer RTRACE_OUTPUT="$work/m-%p.bin" LD_PRELOAD=$lib "$work/hotpath" "$CALLS" "$ROUNDS" ;;
    disabled) RTRACE_DISABLE=1 LD_PRELOAD=$lib "$work/hotpath" "$CALLS" "$ROUNDS" ;;
    # Outside a capture range: a cudaProfilerApi range that the program never starts.
    paused) RTRACE_CAPTURE_RANGE=cudaProfilerApi RTRACE_OUTPUT="$work/p-%p.bin" LD_PRELOAD=$lib "$work/hotpath" "$CALLS" "$ROUNDS" ;;
    # NVTX push/pop pairs: without a tool (NVTX's no-op), and recorded by rtrace.
    nvtx-untraced) "$work/hotpath" "$CALLS" "$ROUNDS" nvtx ;;
    nvtx-traced) RTRACE_BUFFER_RECORDS=$buffer RTRACE_OUTPUT="$work/n-%p.bin" LD_PRELOAD=$lib "$work/hotpath" "$CALLS" "$ROUNDS" nvtx ;;
    traced-old) RTRACE_BUFFER_RECORDS=$buffer RTRACE_OUTPUT="$work/o-%p.bin" LD_PRELOAD=$OLD_LIB "$work/hotpath" "$CALLS" "$ROUNDS" ;;
    disabled-old) RTRACE_DISABLE=1 LD_PRELOAD=$OLD_LIB "$work/hotpath" "$CALLS" "$ROUNDS" ;;
    nvtx-traced-old) RTRACE_BUFFER_RECORDS=$buffer RTRACE_OUTPUT="$work/q-%p.bin" LD_PRELOAD=$OLD_LIB "$work/hotpath" "$CALLS" "$ROUNDS" nvtx ;;
    esac | awk '{print $4}'
}
modes=(untraced traced traced-monotonic disabled paused nvtx-untraced nvtx-traced)
[ -z "${OLD_LIB:-}" ] || modes+=(traced-old disabled-old nvtx-traced-old)
# The order of the modes rotates from one pass to the next, so that no mode always follows
# another (a process inherits its predecessor's cache and frequency state).
for ((i = 0; i < PAIRS; i++)); do
    for ((j = 0; j < ${#modes[@]}; j++)); do
        m=${modes[$(((i + j) % ${#modes[@]}))]}
        run "$m" >>"$work/$m.txt"
    done
done
median() { sort -g "$1" | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
u=$(median "$work/untraced.txt")
t=$(median "$work/traced.txt")
d=$(median "$work/disabled.txt")
m=$(median "$work/traced-monotonic.txt")
p=$(median "$work/paused.txt")
n=$(wc -l <"$work/untraced.txt")
src=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo unknown)
echo "hot-path benchmark ($DRIVER driver): $PAIRS processes x $ROUNDS rounds x $CALLS calls of cuDriverGetVersion per mode"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), clocksource $src"
row() { printf '%-17s %22.2f %18s\n' "$1" "$2" "$3"; }
printf '%-17s %22s %18s\n' mode "ns/call (median of $n)" "added vs untraced"
row untraced "$u" "-"
row traced "$t" "$(awk -v a="$t" -v b="$u" 'BEGIN{printf "%.2f", a-b}')"
row traced-monotonic "$m" "$(awk -v a="$m" -v b="$u" 'BEGIN{printf "%.2f", a-b}')"
row disabled "$d" "$(awk -v a="$d" -v b="$u" 'BEGIN{printf "%.2f", a-b}')"
row paused "$p" "$(awk -v a="$p" -v b="$u" 'BEGIN{printf "%.2f", a-b}')"
nu=$(median "$work/nvtx-untraced.txt")
nt=$(median "$work/nvtx-traced.txt")
printf '%-17s %22s %18s\n' "NVTX push+pop" "ns/pair (median of $n)" "added vs no tool"
row nvtx-untraced "$nu" "-"
row nvtx-traced "$nt" "$(awk -v a="$nt" -v b="$nu" 'BEGIN{printf "%.2f", a-b}')"
if [ -n "${OLD_LIB:-}" ]; then
    # min / median / max of each build's rounds, so a difference can be read against the spread.
    spread() { sort -g "$1" | awk '{a[NR]=$1} END {printf "%.2f / %.2f / %.2f", a[1], (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2, a[NR]}'; }
    echo "this build against OLD_LIB=$OLD_LIB, ns per call or pair, min / median / max of $n rounds:"
    for m in traced disabled nvtx-traced; do
        printf '%-17s this %-26s old %s\n' "$m" "$(spread "$work/$m.txt")" "$(spread "$work/$m-old.txt")"
    done
fi
target/release/rtrace report --format json "$work"/[tmo]-*.bin | python3 -c '
import json, sys
d = json.load(sys.stdin)
recs = sum(p.get("api_records", 0) for p in d["processes"])
drop = sum(p.get("dropped", 0) for p in d["processes"])
print(f"traced runs recorded {recs} API records, dropped {drop}")'
