#!/usr/bin/env bash
# Worker drain benchmark, side by side in one run on the simulated driver: tools/bench/drain_rate.c
# (THREADS threads calling cuDriverGetVersion back to back for SECONDS, default buffers) traced by
# this build and, with OLD_LIB/OLD_RTRACE (the build before), by that one, alternating, RUNS
# processes each, all pinned to CORES. Per run: calls made, records in the trace (rtrace report),
# lost (dropped) as a share of the calls, records written per second of the run, and the
# worker's CPU time per record written (from /proc, read by the program before it exits).
# Prints min / median / max per build and thread count.
#
# Usage: tools/bench-drain.sh [RUNS] [SECONDS] [THREADS...]   (default 5 2 1 4)
# Environment: OLD_LIB, OLD_RTRACE; CORES (default 0,1); OUTDIR (default a temporary directory
# on the same file system as /tmp).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-5}
SECONDS_RUN=${2:-2}
shift 2 2>/dev/null || true
THREADS=("${@:-1 4}")
[ $# -eq 0 ] && THREADS=(1 4)
CORES=${CORES:-0,1}
inc=$(tools/setup-cuda.sh)
cargo build --release -q -p rtrace-inject -p simcuda -p rtrace-collector
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lib"
cp target/release/libcuda.so "$work/lib/libcuda.so.1"
ln -s libcuda.so.1 "$work/lib/libcuda.so"
gcc -O2 -I"$inc" tools/bench/drain_rate.c -L"$work/lib" -lcuda -lpthread -o "$work/drain_rate"
export LD_LIBRARY_PATH="$work/lib"
out=${OUTDIR:-$work}
builds=(new)
[ -n "${OLD_LIB:-}" ] && builds+=(old)

one() { # build threads -> "made recorded dropped worker_ticks hz"
    local lib=$PWD/target/release/librtrace.so rtrace=$PWD/target/release/rtrace
    if [ "$1" = old ]; then lib=$OLD_LIB; rtrace=$OLD_RTRACE; fi
    rm -f "$out"/d-*.bin
    local line
    line=$(RTRACE_OUTPUT="$out/d-%p.bin" LD_PRELOAD=$lib taskset -c "$CORES" "$work/drain_rate" "$2" "$SECONDS_RUN")
    local json
    json=$("$rtrace" report --format json "$out"/d-*.bin 2>/dev/null)
    python3 - "$line" "$json" <<'PY'
import json, sys
f = sys.argv[1].split()
made, ticks, hz = int(f[1]), int(f[3]), int(f[7])
doc = json.loads(sys.argv[2][sys.argv[2].find("{"):])
p = doc["processes"][0]
print(made, p["api_records"], p["dropped"], ticks, hz)
PY
    rm -f "$out"/d-*.bin
}

declare -A rows
for ((i = 0; i < RUNS; i++)); do
    for t in "${THREADS[@]}"; do
        for b in "${builds[@]}"; do
            rows[$b-$t]+="$(one "$b" "$t")"$'\n'
        done
    done
done
printf '%-6s %-8s %-28s %-28s %-28s %-24s\n' build threads "calls made (M)" "lost (% of calls)" \
    "written (M records/s)" "worker CPU (ns/record)"
for t in "${THREADS[@]}"; do
    for b in "${builds[@]}"; do
        printf '%s' "${rows[$b-$t]}" >"$work/rows"
        python3 - "$b" "$t" "$SECONDS_RUN" "$work/rows" <<'PY'
import statistics, sys
b, t, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
made, lost, rate, cpu = [], [], [], []
for line in open(sys.argv[4]):
    m, rec, drop, ticks, hz = map(int, line.split())
    made.append(m / 1e6)
    lost.append(100.0 * drop / m)
    rate.append(rec / secs / 1e6)
    cpu.append(ticks / hz * 1e9 / max(rec, 1))
f = lambda v, d: "/".join(f"{x:.{d}f}" for x in (min(v), statistics.median(v), max(v)))
print(f"{b:<6} {t:<8} {f(made, 1):<28} {f(lost, 2):<28} {f(rate, 1):<28} {f(cpu, 1):<24}")
PY
    done
done
