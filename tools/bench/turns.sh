#!/usr/bin/env bash
# Commands taking turns: N rounds, each command once a round, in the order given, every run
# timed by /usr/bin/time; then per command the wall time and the CPU time (user + system) as
# min / median / max, and the peak resident memory (min-max). Unpinned: for work that uses both
# cores (docs/benchmarks.md, session 16); `PIN=0,1` runs each under `taskset -c 0,1`. The load
# average before each round is printed as the rounds go.
#
#     tools/bench/turns.sh N 'CMD A' 'CMD B' ...
#     tools/bench/turns.sh 8 'old/rtrace report t.bin' 'target/release/rtrace report t.bin'
#
# Each command runs through `sh -c`, its standard output to /dev/null; a command that fails
# is said and the script exits 1.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 N 'CMD' ['CMD'...]" >&2; exit 2; }
rounds=$1
shift
work=$(mktemp -d /tmp/rtrace-turns.XXXXXX)
trap 'rm -rf "$work"' EXIT
pin=()
[ -n "${PIN:-}" ] && pin=(taskset -c "$PIN")
for ((r = 0; r < rounds; r++)); do
    echo "round $((r + 1)): load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    for ((c = 1; c <= $#; c++)); do
        if ! "${pin[@]}" /usr/bin/time -f "%e %U %S %M" -o "$work/t" sh -c "${!c}" >/dev/null 2>"$work/err"; then
            echo "failed: ${!c}" >&2
            tail -n 3 "$work/err" >&2
            exit 1
        fi
        cat "$work/t" >>"$work/$c.txt"
    done
done
echo "$(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg), $rounds rounds"
for ((c = 1; c <= $#; c++)); do
    python3 - "$work/$c.txt" "${!c}" <<'PY'
import statistics, sys
runs = [tuple(map(float, line.split())) for line in open(sys.argv[1]) if line.strip()]
wall = [w for w, _, _, _ in runs]
cpu = [u + s for _, u, s, _ in runs]
rss = [m / 1024 for _, _, _, m in runs]
fmt = lambda v: f"{min(v):.3f} / {statistics.median(v):.3f} / {max(v):.3f}"
print(f"{sys.argv[2]}\n    wall s {fmt(wall)}    cpu s {fmt(cpu)}    peak MiB {min(rss):.0f}-{max(rss):.0f}")
print("    wall s each: " + " ".join(f"{w:.2f}" for w in wall))
PY
done
